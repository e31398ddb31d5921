"""Provider adapters. Only OpenAI-compatible APIs are supported."""
