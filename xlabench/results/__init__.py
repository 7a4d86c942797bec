"""Results files: the CSV schema, writing and reading runs, loading them whole for the gate, merging shards.

A run writes three files under ``results/<suite>/``:

* ``<run-id>.csv``          one row per case, appended and flushed as soon as the case ends;
* ``<run-id>.samples.csv``  every timed iteration (long format: case_id, iteration, seconds), for the gate;
* ``<run-id>.meta.json``    the run's environment, suite file, profile and command line.

Every CSV carries every column (empty where a column does not apply to the workload), so files of
different suites concatenate and the reader never guesses.

Its modules: README.md, Layout. The names imported here are the package's interface.
"""

from xlabench.results.display import LABEL_KEYS, case_labels, fmt_number, varying, varying_columns
from xlabench.results.files import (
    COMPILE_SUFFIX, SAMPLES_SUFFIX, NullWriter, OutputPathError, ResultsFileError, RowWriter, RunFiles, _cell, check_header,
    check_records, finish_meta, make_dir, phase_fields, passed_over, read_meta, read_prior, read_rows, read_samples, read_text, samples_note, update_rows, write_meta,
)
from xlabench.results.progress import RunProgress, incomplete_note, record_interruption, run_progress
from xlabench.results.schema import (
    CASE_COLUMN_NAMES, CASE_COLUMNS, COLUMN_NAMES, COLUMNS, COMPILE_COLUMNS, COMPILE_STATUSES, ENV_COLUMNS,
    ID_COLUMNS, MEASURE_COLUMNS, METRIC_COLUMNS, SAMPLE_COLUMNS, SCHEMA_VERSION, STATUSES, Column, case_id,
)

__all__ = [
    "LABEL_KEYS", "case_labels", "fmt_number", "varying", "varying_columns",
    "COMPILE_SUFFIX", "SAMPLES_SUFFIX", "NullWriter", "OutputPathError", "ResultsFileError", "RowWriter", "RunFiles", "_cell", "check_header", "check_records", "read_meta", "read_prior", "read_rows",
    "finish_meta", "phase_fields", "make_dir", "passed_over", "read_samples", "read_text", "samples_note", "update_rows", "write_meta",
    "RunProgress", "incomplete_note", "record_interruption", "run_progress",
    "CASE_COLUMN_NAMES", "CASE_COLUMNS", "COLUMN_NAMES", "COLUMNS", "COMPILE_COLUMNS", "COMPILE_STATUSES",
    "ENV_COLUMNS", "ID_COLUMNS", "MEASURE_COLUMNS", "METRIC_COLUMNS", "SAMPLE_COLUMNS", "SCHEMA_VERSION", "STATUSES",
    "Column", "case_id",
]
