"""Files that configure code which runs later, for every ecosystem: one table, for grants and questions.

A session grant never covers such a file, and a consent question flags it; both ask
`configures_code`, so the two cannot disagree. The protected paths (`oct_mcp.protected`: CI,
git hook managers, agent and IDE configuration, shell start-up files, `.git`) configure code
too: they are read from there, not listed twice.
"""

from __future__ import annotations

from typing import Final

from oct_mcp.protected import GIT_RULE, PROTECTED_RULES

__all__ = [
    "CODE_CONFIG_FOLDERS",
    "CODE_CONFIG_NAMES",
    "CODE_CONFIG_STEMS",
    "CODE_CONFIG_SUFFIXES",
    "configures_code",
]


def _names(*names: str) -> frozenset[str]:
    return frozenset(name.casefold() for name in names)


# Whole file names, anywhere in the tree. Lock files are here: they say which code gets installed.
CODE_CONFIG_NAMES: Final = _names(
    # Python: pytest, the build, the interpreter, the installers.
    "conftest.py",
    "pyproject.toml",
    "setup.cfg",
    "setup.py",
    "tox.ini",
    "noxfile.py",
    "pytest.ini",
    "sitecustomize.py",
    "usercustomize.py",
    "pip.conf",
    "pip.ini",
    "pipfile",
    "pipfile.lock",
    "poetry.lock",
    "poetry.toml",
    "uv.lock",
    "uv.toml",
    "pdm.lock",
    "pdm.toml",
    "hatch.toml",
    "pixi.toml",
    "environment.yml",
    "environment.yaml",
    ".python-version",
    ".pythonstartup",
    # JavaScript and TypeScript: scripts (postinstall), registries, package managers and their plugins.
    "package.json",
    "package-lock.json",
    "npm-shrinkwrap.json",
    "yarn.lock",
    "pnpm-lock.yaml",
    "pnpm-workspace.yaml",
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    ".pnpmfile.cjs",
    ".pnpmfile.js",
    "bunfig.toml",
    "bun.lock",
    "bun.lockb",
    "deno.json",
    "deno.jsonc",
    "deno.lock",
    ".nvmrc",
    ".node-version",
    # Rust.
    "cargo.toml",
    "cargo.lock",
    "build.rs",
    "rust-toolchain",
    "rust-toolchain.toml",
    # Go.
    "go.mod",
    "go.sum",
    "go.work",
    "go.work.sum",
    # Make and other build systems and task runners.
    "makefile",
    "gnumakefile",
    "makefile.am",
    "makefile.in",
    "configure",
    "configure.ac",
    "cmakelists.txt",
    "cmakepresets.json",
    "meson.build",
    "meson_options.txt",
    "meson.options",
    "build",
    "build.bazel",
    "workspace",
    "workspace.bazel",
    "module.bazel",
    ".bazelrc",
    ".bazelversion",
    "buck",
    ".buckconfig",
    "justfile",
    ".justfile",
    "taskfile.yml",
    "taskfile.yaml",
    "taskfile.dist.yml",
    "sconstruct",
    "sconscript",
    "build.ninja",
    "mise.toml",
    ".mise.toml",
    ".tool-versions",
    # Java, Kotlin, Scala: Gradle, Maven, Ant, sbt.
    "pom.xml",
    "build.gradle",
    "build.gradle.kts",
    "settings.gradle",
    "settings.gradle.kts",
    "gradle.properties",
    "gradle-wrapper.properties",
    "gradlew",
    "gradlew.bat",
    "mvnw",
    "mvnw.cmd",
    "build.xml",
    "build.sbt",
    # Ruby.
    "gemfile",
    "gemfile.lock",
    "rakefile",
    "guardfile",
    "capfile",
    "config.ru",
    ".rspec",
    ".rubocop.yml",
    ".ruby-version",
    ".irbrc",
    ".pryrc",
    # PHP, .NET, Elixir, Dart, Swift, Nix.
    "composer.json",
    "composer.lock",
    "phpunit.xml",
    "phpunit.xml.dist",
    "directory.build.props",
    "directory.build.targets",
    "directory.packages.props",
    "nuget.config",
    "global.json",
    "mix.exs",
    "pubspec.yaml",
    "package.swift",
    "flake.nix",
    "flake.lock",
    "shell.nix",
    "default.nix",
    "devenv.nix",
    "devbox.json",
    # git's own files in the tree: attributes pick filters and diff drivers, modules fetch code.
    ".gitattributes",
    ".gitmodules",
    ".gitconfig",
    ".lfsconfig",
    # The environment tools load before they run (direnv's `.envrc` is a protected path).
    ".env",
    ".flaskenv",
    # Containers.
    "dockerfile",
    "containerfile",
    "docker-compose.yml",
    "docker-compose.yaml",
    "compose.yml",
    "compose.yaml",
    "compose.override.yml",
    "compose.override.yaml",
    "docker-bake.hcl",
    # CI and deploy files the protected paths do not name.
    "appveyor.yml",
    ".appveyor.yml",
    "cloudbuild.yaml",
    "cloudbuild.yml",
    "buildspec.yml",
    ".woodpecker.yml",
    "codemagic.yaml",
    "bitrise.yml",
    "netlify.toml",
    "vercel.json",
    "procfile",
    # What steers an agent that runs commands in this project.
    "agents.md",
    "claude.md",
    "claude.local.md",
    "gemini.md",
    ".cursorrules",
    ".windsurfrules",
    ".clinerules",
    ".goosehints",
    "copilot-instructions.md",
    ".aider.conf.yml",
    ".continuerc.json",
    # Editors' project files that run commands.
    ".nvim.lua",
    ".exrc",
    ".vimrc",
    ".sublime-project",
)

# A name that is the stem and an extension (`eslint.config.mjs`, `.eslintrc.json`, `Dockerfile.dev`).
CODE_CONFIG_STEMS: Final = _names(
    "eslint.config",
    ".eslintrc",
    "prettier.config",
    ".prettierrc",
    "babel.config",
    ".babelrc",
    "jest.config",
    "vitest.config",
    "vitest.workspace",
    "vite.config",
    "webpack.config",
    "rollup.config",
    "rspack.config",
    "esbuild.config",
    "tsup.config",
    "next.config",
    "nuxt.config",
    "svelte.config",
    "astro.config",
    "remix.config",
    "metro.config",
    "tailwind.config",
    "postcss.config",
    ".postcssrc",
    "playwright.config",
    "cypress.config",
    "karma.conf",
    ".mocharc",
    "stylelint.config",
    ".stylelintrc",
    "commitlint.config",
    ".commitlintrc",
    "lint-staged.config",
    ".lintstagedrc",
    ".swcrc",
    "tsconfig",
    "jsconfig",
    "gulpfile",
    "gruntfile",
    "dockerfile",
    "containerfile",
    "docker-compose",
    ".env",
)

# A name that starts so and ends so (`requirements-dev.txt`, `constraints.in`): what pip installs.
_PREFIXED: Final = (("requirements", (".txt", ".in")), ("constraints", (".txt", ".in")))

# Name endings: what a build reads wherever it lies.
CODE_CONFIG_SUFFIXES: Final = (
    ".pth",
    ".pyc",
    ".mk",
    ".cmake",
    ".bzl",
    ".bazel",
    ".gradle",
    ".gradle.kts",
    ".sbt",
    ".gemspec",
    ".csproj",
    ".fsproj",
    ".vbproj",
    ".sln",
    ".props",
    ".targets",
    ".dockerfile",
    ".code-workspace",
    ".sublime-project",
)

# Folders whose files run, or configure what runs: interpreters' environments, installed
# packages, package managers' and build tools' own folders.
CODE_CONFIG_FOLDERS: Final = _names(
    ".venv",
    "venv",
    ".tox",
    ".nox",
    "site-packages",
    "__pycache__",
    "node_modules",
    ".yarn",
    ".cargo",
    ".mvn",
    ".gradle",
    ".bundle",
    ".direnv",
    ".ipython",
    ".semaphore",
    ".woodpecker",
    ".gitlab",
    ".github",
    ".config",
)


# The protected rules' names and prefixes, read from them once: one source, one set lookup a path.
# The git folder's own rule is left out: a ref a git tool writes runs nothing, and its files that
# do (hooks, config, attributes) are named below.
_PROTECTED_COMPONENTS: Final = frozenset().union(
    *(rule.components for rule in PROTECTED_RULES if rule is not GIT_RULE)
)
_PROTECTED_PREFIXES: Final = tuple(prefix for rule in PROTECTED_RULES for prefix in rule.prefixes)
_GIT_FOLDER: Final = ".git"
_GIT_RUNS: Final = frozenset({"hooks", "config", "config.worktree", "attributes", "modules"})


def configures_code(relative: str) -> bool:
    """A project file that configures code which runs later, in any ecosystem, or a protected path.

    Args:
        relative: The path relative to the project root, `/`-separated.
    """
    parts = tuple(part for part in relative.casefold().split("/") if part not in ("", "."))
    if not parts:
        return False
    name = parts[-1]
    return (
        name in CODE_CONFIG_NAMES
        or _has_stem(name)
        or name.endswith(CODE_CONFIG_SUFFIXES)
        or any(name.startswith(start) and name.endswith(ends) for start, ends in _PREFIXED)
        or not CODE_CONFIG_FOLDERS.isdisjoint(parts[:-1])
        or not _PROTECTED_COMPONENTS.isdisjoint(parts)
        or any(parts[: len(prefix)] == prefix for prefix in _PROTECTED_PREFIXES)
        or _in_git_folder_and_runs(parts)
    )


def _in_git_folder_and_runs(parts: tuple[str, ...]) -> bool:
    """A file of a git folder that makes git run something: a hook, its config, its attributes."""
    if _GIT_FOLDER not in parts:
        return False
    inside = parts[parts.index(_GIT_FOLDER) + 1 :]
    return not _GIT_RUNS.isdisjoint(inside)


def _has_stem(name: str) -> bool:
    """`name` is a stem of the table, a dot, and more: each dot after the first character is tried."""
    dot = name.find(".", 1)
    while dot != -1:
        if name[:dot] in CODE_CONFIG_STEMS:
            return True
        dot = name.find(".", dot + 1)
    return False
