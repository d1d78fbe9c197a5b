"""Every test's `hlogen run` writes its executable cache under pytest's temporary
directory, never into the user's ~/.cache/hlogen (tests that need their own set it).

The tests of LONG (each 20 s or more on 2 cores: whole reductions, bisections, fuzz runs,
documentation pages end to end) are marked `long`: `make test` leaves them out so that it
stays well under 15 minutes on 2 cores, `make test-long` runs them."""
import pytest

LONG = {
    "test_cli_arrays.py::test_an_npz_keyed_by_parameter_names_is_matched_by_name[bytecode]",
    "test_cli_arrays.py::test_an_npz_keyed_by_parameter_names_is_matched_by_name[py]",
    "test_cli_arrays.py::test_raw_ml_dtypes_arrays_in_and_out[bf16]",
    "test_cli_bisect.py::test_a_divergence_no_hlo_pass_explains",
    "test_cli_bisect.py::test_bisect_names_the_pass_of_each_rewrite[log_exp]",
    "test_cli_bisect.py::test_bisect_names_the_pass_of_each_rewrite[round_trick]",
    "test_cli_bisect.py::test_bisect_names_the_pass_of_each_rewrite[scale_unscale]",
    "test_cli_bisect.py::test_bisect_names_the_pass_of_each_rewrite[sqrt_square]",
    "test_cli_bisect.py::test_nothing_to_explain",
    "test_cli_compare.py::test_the_readme_example_runs_as_written",
    "test_cli_fuzz.py::test_a_bitcast_of_values_that_match_is_not_a_finding",
    "test_cli_fuzz.py::test_a_crash_in_the_corpus_is_a_finding_and_the_fuzzer_goes_on",
    "test_cli_fuzz.py::test_the_page_s_example_and_what_it_writes",
    "test_cli_layouts.py::test_a_custom_call_gets_the_layouts_it_asks_for_without_hlo_passes",
    "test_cli_plugins.py::test_a_plugin_given_by_path_that_aborts_is_named_with_its_signal",
    "test_cli_plugins.py::test_a_plugin_named_as_an_installed_one_replaces_it_and_says_so",
    "test_cli_plugins.py::test_check_on_the_plugin_says_what_jaxlibs_cpu_does",
    "test_cli_plugins.py::test_plugin_over_the_environment_and_two_libraries_under_one_name",
    "test_cli_plugins.py::test_run_and_compile_on_the_installed_plugin",
    "test_cli_process.py::test_a_corrupt_entry_is_compiled_again_and_rewritten",
    "test_cli_process.py::test_each_command_as_a_process",
    "test_cli_readme.py::test_every_command_of_the_worked_examples",
    "test_cli_reduce.py::test_a_1000_op_divergence_on_random_inputs_is_reduced_to_the_trick",
    "test_cli_reduce.py::test_a_crash_of_xla_is_reduced_and_the_command_still_crashes",
    "test_cli_reduce.py::test_the_api_reduces_log_exp_on_inputs_given",
    "test_cli_reduce.py::test_the_readme_examples",
    "test_conformance.py::test_a_crash_and_a_timeout_are_recorded_and_the_run_goes_on",
    "test_conformance.py::test_cli_reports_and_exit_codes",
    "test_distributed.py::test_collectives_across_two_processes",
    "test_docs.py::test_a_dynamic_module_that_ends_xla_is_reduced",
    "test_dynamism_crash.py::test_an_issue_module_is_reduced_while_it_still_aborts_xla[47345]",
    "test_fuzz_signals.py::test_a_signal_writes_what_fuzz_found[15]",
    "test_fuzz_signals.py::test_a_signal_writes_what_fuzz_found[2]",
    "test_fuzz_signatures.py::test_a_rerun_keeps_the_smaller_reproducer",
    "test_loading_readme.py::test_the_xla_dump_session_runs_as_written",
    "test_origin_cli.py::test_an_allowed_difference_exits_0_and_strict_counts_it",
    "test_origin_cli.py::test_the_page",
    "test_partitions.py::test_check_runs_stablehlos_cases_with_partitions",
    "test_plugin_crashes.py::test_conformance_records_a_crash_per_module_and_goes_on",
    "test_plugin_readme.py::test_testing_your_pjrt_plugin",
    "test_readme.py::test_the_backend_bug_hunter_s_quick_start",
    "test_reduce.py::test_a_divergence_in_a_residual_stack_is_reduced_to_the_ops_that_diverge",
    "test_robustness.py::test_reproducers_that_once_killed_the_process[complex_less_interpret]",
    "test_robustness.py::test_reproducers_that_once_killed_the_process[complex_remainder_cpu]",
    "test_sharded.py::test_every_form_runs_partitioned_bit_for_bit_with_jax",
    "test_sharded.py::test_the_documentation",
    "test_sharded.py::test_what_each_form_says_of_its_partitions",
    "test_three_way_judged.py::test_the_page",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.nodeid.removeprefix("tests/") in LONG:
            item.add_marker(pytest.mark.long)


@pytest.fixture(autouse=True, scope="session")
def _executable_cache_in_a_temporary_directory(tmp_path_factory):
    patch = pytest.MonkeyPatch()
    patch.setenv("HLOGEN_CACHE_DIR", str(tmp_path_factory.mktemp("executable-cache")))
    yield
    patch.undo()
