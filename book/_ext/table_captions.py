"""Number glued tables as tables.

myst-nb shows a glued object with a caption through ``{glue:figure}``, which Sphinx numbers as a
figure. A glued *table* (a pandas Styler or DataFrame) should read "Table 3", not "Fig. 3". Give
its directive ``:figclass: table`` and this extension turns the figure into a ``captioned_table``
node, which Sphinx numbers in its own sequence ("table") and ``{numref}`` refers to as a table.
The HTML is the figure's (same visitor), with the CSS class ``captioned-table``.
"""

from __future__ import annotations

from docutils import nodes
from docutils.transforms import Transform
from sphinx.writers.html5 import HTML5Translator

__all__ = ["captioned_table", "setup"]


class captioned_table(nodes.figure):  # noqa: N801  (docutils node naming)
    """A figure that Sphinx counts as a table."""


class TablesFromFigures(Transform):
    """Replace every figure with the class ``table`` by a :class:`captioned_table`."""

    default_priority = 200   # before Sphinx collects labels and numbers

    def apply(self):
        for figure in list(self.document.findall(nodes.figure)):
            if "table" not in figure["classes"] or isinstance(figure, captioned_table):
                continue
            table = captioned_table(figure.rawsource, *figure.children, **figure.attributes)
            table["classes"] = [c for c in figure["classes"] if c != "table"] + ["captioned-table"]
            figure.replace_self(table)
            for node_id in table["ids"]:          # labels resolve through document.ids
                self.document.ids[node_id] = table


def setup(app):
    """Register the numbered table node (drawn as a figure) and the transform that makes it."""
    app.add_enumerable_node(captioned_table, "table",
                            html=(HTML5Translator.visit_figure, HTML5Translator.depart_figure),
                            latex=(lambda self, node: self.visit_figure(node),
                                   lambda self, node: self.depart_figure(node)),
                            text=(lambda self, node: None, lambda self, node: None))
    app.add_transform(TablesFromFigures)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
