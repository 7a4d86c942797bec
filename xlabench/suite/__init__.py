"""Suite YAML -> validated Suite (pydantic) -> profile applied -> matrix expanded -> list[Case].

Every error names the file, the key path (with its line where the YAML has it) and what was expected,
and is raised as SuiteError, which the CLI turns into exit code 2 without a traceback.

Its modules: README.md, Layout.
"""

from xlabench.suite.expand import Suite, count_cases, expand
from xlabench.suite.suite_yaml import load
from xlabench.suite.spec import MAX_CASES, MAX_YAML_NODES, Case, Measure, Profile, SuiteError, SuiteSpec

__all__ = ["count_cases", "expand", "load", "MAX_CASES", "MAX_YAML_NODES", "Case", "Measure", "Profile", "Suite", "SuiteError",
           "SuiteSpec"]
