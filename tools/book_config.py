"""The repository links and launch buttons of the built book, from one setting.

``tools/make_build_tree.py`` writes the build tree's ``_config.yml`` from the repository's;
:func:`with_repository` decides, from one URL, which links the pages carry:

* a URL given (``$BOOK_REPOSITORY_URL``, or ``--repository-url``): the repository button, the
  "open an issue" button, and the launch buttons Binder (mybinder.org) and Colab on every
  notebook page, all pointing at that repository (branch ``$BOOK_REPOSITORY_BRANCH``, default
  ``main``);
* no URL (unset or empty): no repository, issue or launch button, and the configuration holds
  no repository URL at all (``repository.url`` is empty, so jupyter-book's own default is not
  used either).

The chapters are MyST-Markdown notebooks (``book/<name>.md``), opened as notebooks by jupytext,
which the repository's environment (``requirements-lock.txt``, ``environment.yml``) installs.
The theme builds launch links to ``<page>.ipynb`` (the build tree holds the executed notebooks);
``book/_ext/launch_sources.py`` points the Binder and JupyterHub links at the ``.md`` source the
repository holds. Colab opens only ``.ipynb`` files, so its button opens the page's path with that
suffix: it works on a branch that holds the executed notebooks (``BOOK_REPOSITORY_BRANCH``).

Standard library only (the configuration is a plain dict).
"""

from __future__ import annotations

import copy
import os
import re

REPOSITORY_ENV = "BOOK_REPOSITORY_URL"
BRANCH_ENV = "BOOK_REPOSITORY_BRANCH"
BINDER_URL = "https://mybinder.org"
COLAB_URL = "https://colab.research.google.com"
_URL = re.compile(r"^https?://[^\s/]+/[^\s]+$")


def repository_url(environ: dict | None = None) -> str | None:
    """The repository URL of ``$BOOK_REPOSITORY_URL`` (None when unset or blank).

    Raises
    ------
    ValueError
        The value is not an ``http(s)://host/path`` URL.
    """
    value = (os.environ if environ is None else environ).get(REPOSITORY_ENV, "").strip()
    if not value:
        return None
    if not _URL.match(value):
        raise ValueError(f"{REPOSITORY_ENV}={value!r} is not a repository URL such as https://github.com/org/repo")
    return value.rstrip("/").removesuffix(".git")


def with_repository(config: dict, url: str | None, *, branch: str = "main") -> dict:
    """A copy of the book configuration ``config`` with the links ``url`` allows.

    Parameters
    ----------
    config : dict
        The parsed ``_config.yml`` (not modified).
    url : str or None
        The repository's URL; None: no repository links and no launch buttons.
    branch : str
        The branch the launch buttons open.

    Returns
    -------
    dict
        The configuration with ``repository``, ``launch_buttons`` and the ``html`` button
        switches set accordingly.
    """
    out = copy.deepcopy(config)
    repository = out.setdefault("repository", {}) or {}
    out["repository"] = repository
    launch = out.setdefault("launch_buttons", {}) or {}
    out["launch_buttons"] = launch
    html = out.setdefault("html", {}) or {}
    out["html"] = html
    on = bool(url)
    repository["url"] = url.rstrip("/") if on else ""
    repository["branch"] = branch
    repository.setdefault("path_to_book", "")
    launch["binderhub_url"] = BINDER_URL if on else ""
    launch["colab_url"] = COLAB_URL if on else ""
    launch.setdefault("notebook_interface", "classic")
    html["use_repository_button"] = on
    html["use_issues_button"] = on
    html.setdefault("use_edit_page_button", False)
    return out


def from_environment(config: dict, environ: dict | None = None) -> dict:
    """:func:`with_repository` with the URL and branch of the environment."""
    env = os.environ if environ is None else environ
    return with_repository(config, repository_url(env), branch=env.get(BRANCH_ENV, "").strip() or "main")
