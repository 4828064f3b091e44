"""What the book tests' hand-made chapters share: the MyST notebook header jupytext reads."""

#: The front matter of a jupytext MyST chapter run by the python3 kernel, as every page of book/ has.
MYST_FRONT_MATTER = """\
---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---
"""
