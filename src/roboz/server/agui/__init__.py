"""AG-UI for RoboZ agents: ``POST /v1/agui`` runs a turn and streams it as AG-UI events
(``ag-ui-protocol``, in the ``roboz[server]`` extra), so an AG-UI frontend drives a served
agent unchanged. :func:`agui_messages` is a thread as an AG-UI client holds it."""

from roboz.server.agui.route import router
from roboz.server.agui.translate import RunTranslator, agui_messages, agui_state

__all__ = ["RunTranslator", "agui_messages", "agui_state", "router"]
