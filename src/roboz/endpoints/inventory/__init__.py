"""The bundled example catalogue: OpenRouter, Cerebras and Groq routes as typed attributes.

``from roboz.endpoints.inventory import openrouter; openrouter.z_ai__glm_5_3`` gives an
endpoint; no credential is read and no client built until it is first called. The routes are
generated from ``models.json`` beside this file (``roboz inventory generate``).
"""

from roboz.endpoints.inventory.providers import cerebras, groq, openrouter

__all__ = ["cerebras", "groq", "openrouter"]
