"""Arize's OpenInference instrumentation (openinference-instrumentation-openai), with a
session id set through openinference.instrumentation.using_session.

(Named open_inference.py: a script named openinference.py would shadow the package.)"""

import _common
from openinference.instrumentation import using_session
from openinference.instrumentation.openai import OpenAIInstrumentor

SESSION_ID = "sess-openinference"

providers = _common.setup("senders-openinference")
OpenAIInstrumentor().instrument()
with using_session(SESSION_ID):
    _common.chat_calls(_common.client())
_common.shutdown(providers)
