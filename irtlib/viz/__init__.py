"""Figures and the static HTML report (matplotlib; loaded only when used).

Layer rule: may import every layer below ``book``.
"""
