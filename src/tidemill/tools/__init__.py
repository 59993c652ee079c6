"""Tools: functions and actions a model may call.

`@tool` turns a function into a tool, `Tool` builds one by hand, and
`ToolRegistry` holds an agent's tools by name.
"""

from tidemill.tools._context import ToolContext
from tidemill.tools._decorator import tool
from tidemill.tools._docstring import Docstring, parse_docstring
from tidemill.tools._registry import ToolLike, ToolRegistry, as_tool
from tidemill.tools._return import ToolReturn
from tidemill.tools._tool import FunctionTool, Tool, render_result

__all__ = [
    "Docstring",
    "FunctionTool",
    "Tool",
    "ToolContext",
    "ToolLike",
    "ToolRegistry",
    "ToolReturn",
    "as_tool",
    "parse_docstring",
    "render_result",
    "tool",
]
