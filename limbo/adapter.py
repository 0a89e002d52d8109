"""The public model-adapter API, where plugins and README import it from.

``from limbo.adapter import ModelAdapter, ModelTurn, ToolCall, Usage, model_adapter`` is the
name a plugin author writes; the definitions live with the rest of one episode, in
:mod:`limbo.episode.models`. This module only hands them on, so that moving them inside the
package never breaks a plugin.
"""

from limbo.episode.models import (
           EpisodeContext,
           Message,
           ModelAdapter,
           ModelTurn,
           ToolCall,
           ToolDef,
           make_adapter,
           model_adapter,
           parse_model,
)
from limbo.log.records import Usage

__all__ = ["EpisodeContext", "Message", "ModelAdapter", "ModelTurn", "ToolCall", "ToolDef",
           "Usage", "make_adapter", "model_adapter", "parse_model"]
