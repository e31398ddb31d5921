"""RoboZ: typed LLM agents whose tools chain conditionally."""
