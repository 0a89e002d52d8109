"""Which tests leave the fast loop, and why: the one table ``tests/conftest.py`` marks them from.

``make check`` runs the tests marked none of ``slow``, ``harness``, ``ray``, ``browser``; ``make
test`` (and CI) runs them all. A key is a test file, or ``file::test`` for one test of a file
that is otherwise fast. ``harness``, ``ray`` and ``browser`` say what a test needs (a production
harness CLI, a Ray cluster, a headless chromium) and are checked against what the file uses
(``tests/test_marks.py``); ``slow`` is measured (:data:`SLOW`).
"""

from __future__ import annotations

import re

MARKS: dict[str, tuple[str, ...]] = {
    # production harness CLIs (LIMBO_HARNESS_DIR)
    "test_harnesses_failures.py": ("harness",),
    "test_harnesses_guard.py": ("harness",),
    "test_harnesses_install.py": ("harness",),
    "test_harnesses_production.py": ("harness",),
    "test_proxy_harness.py": ("harness",),
    "test_runs_docs.py::test_the_plan_line_example_is_what_a_dry_run_of_the_paper_grid_prints": (
        "harness",),
    "test_worldfile_harness.py": ("harness",),
    # a Ray cluster on 127.0.0.1
    "test_ray_cluster_support.py": ("ray",),
    "test_ray_executor.py": ("ray",),
    "test_ray_limiter.py": ("ray",),
    "test_ray_shared.py": ("ray",),
    "test_ray_stream.py": ("ray",),
    "test_user_home.py::test_a_ray_token_in_the_users_home_does_not_reach_a_test_cluster": ("ray",),
    "test_scale_docs.py::test_the_ray_commands_use_flags_that_exist": ("ray",),
    # Debian's headless chromium, driven by Playwright
    "test_report_browser.py": ("browser",),
}
"""Test file (or ``file::test``) -> what it needs."""

SLOW: dict[str, float] = {
    # whole files, from an earlier run of the whole suite
    "test_analysis_paper.py": 55.0,
    "test_analysis_identity.py": 155.0,
    "test_analysis_summary.py": 110.0,
    "test_analysis_figures_legible.py": 3.0,
    "test_grid_runner.py": 40.0,
    "test_harnesses_guard.py": 88.0,
    "test_harnesses_production.py": 51.0,
    "test_ray_executor.py": 63.0,
    "test_readme.py": 39.0,
    # from a run of the fast set (below); a file whole where its module fixture, once its slow
    # tests were out, still took seconds in the setup of the next test (a second run)
    "test_analysis_docs.py": 59.6,
    "test_inspect_eval.py": 24.9,
    "test_proxy_readers.py": 11.4,
    "test_rated_rule.py": 10.5,
    "test_worldfile_shop.py": 19.4,
    "test_analysis_design.py": 61.1,
    "test_cli.py": 32.5,
    "test_function_length.py": 0.4,
    "test_hostile_processes.py": 28.4,
    "test_hostile_server.py": 21.1,
    "test_mcp_command.py": 11.4,
    "test_plugin_interrupts.py": 4.2,
    "test_proxy_cli.py": 36.2,
    "test_proxy_crash.py": 45.5,
    "test_proxy_durable.py": 54.0,
    "test_proxy_fuzz.py": 37.0,
    "test_proxy_hostile.py": 14.5,
    "test_proxy_truth.py": 19.8,
    "test_proxy_ledger.py": 34.1,
    "test_secrets_cli.py": 1.2,
    "test_view_resets.py": 4.4,
    "test_worldfile_mcp.py": 3.0,
    "test_precision.py::test_over_ten_grid_seeds_precision_saves_and_lands_inside_the_full_grids_intervals": 16.5,
    "test_precision.py::test_precision_reaches_the_target_on_every_arm_with_fewer_episodes": 1.9,
    "test_precision.py::test_precision_records_are_the_full_grids_records": 0.1,
    "test_precision.py::test_the_precise_estimate_is_the_mean_of_the_full_grids_first_worlds": 0.6,
    "test_precision.py::test_an_estimate_lands_inside_the_full_interval_as_often_as_its_worlds_allow": 4.6,
    "test_precision.py::test_resuming_continues_the_same_sequence": 2.6,
    "test_precision.py::test_every_table_and_the_status_say_the_run_stopped_early": 0.2,
    "test_precision.py::test_the_runs_page_shows_what_the_example_prints": 2.2,
    "test_precision.py::test_peeking_breaks_a_fixed_n_interval_and_not_the_sequence": 2.2,
    "test_precision.py::test_the_simulation_computes_the_shipped_sequence": 1.1,
    "test_precision.py::test_forked_workers_stop_each_arm_where_one_process_does": 5.4,
    "test_fault_cost.py::test_limbo_proxy_runs_are_priced_too": 10.5,
    # limbo conform (the gallery: 14 runs, 7 servers x stdio, HTTP), measured together on two
    # cores at load 6-7 (other work beside)
    "test_conform_gallery.py": 150.0,
    "test_conform_cli.py": 130.0,
    "test_conform_docs.py::test_the_worked_example_runs_as_printed": 20.0,
    "test_fault_act.py::test_the_same_act_runs_in_limbo_proxy": 7.3,
    "test_fault_act.py::test_limbo_run_and_limbo_mcp_load_the_mode": 5.1,
    "test_repeats.py::test_replicate_zero_is_the_run_without_repeats_byte_for_byte": 4.2,
    "test_repeats.py::test_records_of_both_versions_validate_against_the_published_schema": 2.1,
    "test_repeats.py::test_pass_k_matches_the_closed_form_within_its_interval": 0.1,
    "test_repeats.py::test_the_summary_and_table_14_print_the_same_numbers": 0.7,
    "test_repeats.py::test_without_repeats_the_grids_are_what_they_were": 1.5,
    "test_analysis_cli.py::test_a_gee_on_too_few_clusters_says_why_and_the_rest_stands": 1.6,
    "test_analysis_cli.py::test_a_second_harness_adds_its_rows_and_the_e3_block": 2.7,
    "test_analysis_cli.py::test_bootstrap_adds_an_interval_to_every_rate": 0.4,
    "test_analysis_cli.py::test_bootstrap_progress_only_on_a_terminal": 14.0,
    "test_analysis_cli.py::test_cluster_is_a_parameter": 0.5,
    "test_analysis_cli.py::test_corrupt_future_and_duplicated_records": 0.4,
    "test_analysis_cli.py::test_errored_episodes_are_counted_not_rated": 0.3,
    "test_analysis_cli.py::test_tables_print_markdown_and_say_what_is_absent": 3.4,
    "test_analysis_cli.py::test_without_the_analysis_extra": 3.3,
    "test_analysis_compare.py::test_bad_requests_are_one_line": 7.7,
    "test_analysis_compare.py::test_clustering_is_what_makes_the_p_honest": 4.6,
    "test_analysis_compare.py::test_compare_matches_a_hand_count": 5.4,
    "test_analysis_compare.py::test_every_difference_has_a_seeded_bootstrap_interval": 9.4,
    "test_analysis_compare.py::test_runs_with_nothing_in_common": 2.9,
    "test_analysis_compare.py::test_shuffled_with_a_cell_removed": 2.1,
    "test_analysis_compare.py::test_two_levels_of_one_factor_in_one_run": 1.6,
    "test_analysis_compare.py::test_thirty_worlds_all_one_way_print_the_exact_sign_flip_p": 14.5,
    "test_analysis_figures.py::test_figure3_draws_a_missing_cell_as_missing": 2.0,
    "test_analysis_figures.py::test_figure4_reads_without_the_tail_panel_data": 0.5,
    "test_analysis_figures.py::test_the_permutation_test_separates_and_does_not_invent": 0.4,
    "test_analysis_figures.py::test_saving_without_the_disabled_drawing_pass_changes_no_byte": 5.4,
    "test_analysis_stats.py::test_clustered_reference_values_are_reproduced_by_both_routes": 5.6,
    "test_analysis_cluster.py::test_coverage_by_simulation": 2.8,
    "test_analysis_cluster.py::test_a_rare_outcome_in_sixteen_worlds_is_covered": 2.5,
    "test_analysis_cluster.py::test_a_world_of_twenty_thousand_episodes_is_computed_in_pieces": 2.7,
    "test_analysis_paired.py::test_the_order_pairs_were_loaded_in_does_not_move_the_monte_carlo_p": 4.2,
    "test_analysis_paired.py::test_sign_flip_with_many_worlds_stays_right": 1.8,
    "test_analysis_paired.py::test_a_holm_p_is_a_bound_where_a_monte_carlo_floor_sets_it": 1.2,
    "test_analysis_paired.py::test_sign_flip_is_exact_beyond_twenty_worlds": 1.2,
    "test_analysis_paired.py::test_past_a_thousand_worlds_is_monte_carlo": 1.1,
    "test_analysis_uncertainty_docs.py::test_the_worked_example_prints_what_the_page_shows": 1.9,
    "test_analysis_uncertainty_docs.py::test_the_coverage_rows_are_the_benchmarks": 13.6,
    "test_analysis_table.py::test_limbo_tables_on_one_world_prints_no_interval": 15.7,
    "test_cli_help.py::test_help_prints_and_exits_zero": 0.6,
    "test_conditions_grid.py::test_prompt_conditions_change_nothing_for_reference_policies": 0.7,
    "test_conditions_grid.py::test_sdk_retry_does_not_raise_duplicates_where_the_keyed_policys_key_is_honoured": 0.6,
    "test_conditions_grid.py::test_sdk_retry_raises_duplicates_on_committed_faults": 2.6,
    "test_conditions_grid.py::test_the_guard_removes_duplicates_where_a_read_back_resolves": 1.7,
    "test_conditions_grid.py::test_the_guard_removes_every_duplicate_under_keys_everywhere": 2.5,
    "test_conditions_grid.py::test_the_outcome_oracle_is_exactly_once_on_late_commits_and_never_worse": 1.4,
    "test_conditions_grid.py::test_waiting_delta_before_the_read_is_exactly_once_with_probability_p_delta": 4.7,
    "test_episode_from.py::test_twenty_cells_of_the_default_grid_rerun_byte_for_byte": 0.9,
    "test_episode_rerun.py::test_episode_timeout_ends_a_hanging_adapter": 0.3,
    "test_episode_rerun.py::test_from_reaches_the_model_as_the_run_did_or_where_it_moved": 1.3,
    "test_faults_equivalence.py::test_agent_view_is_identical_across_a_group": 2.2,
    "test_faults_ledger.py::test_ledger_of_each_mode": 0.9,
    "test_faults_picture.py::test_blind_duplicates_on_every_committed_mode_unless_the_write_cannot_repeat": 2.4,
    "test_faults_picture.py::test_keyed_under_keys_everywhere_never_duplicates": 1.2,
    "test_faults_picture.py::test_only_checking_successes_catches_a_phantom": 0.8,
    "test_faults_picture.py::test_verify_is_enough_only_where_a_strong_read_back_resolves": 1.4,
    "test_forecast.py::test_a_cached_grid_is_forecast_free": 2.6,
    "test_forecast.py::test_a_dry_run_pilot_then_the_run_records_forecast_and_actual": 7.9,
    "test_forecast.py::test_status_reads_what_a_pass_spent_so_far_from_its_records": 1.2,
    "test_forecast.py::test_student_t_points_match_scipy": 1.9,
    "test_gateway_sdk.py::test_responses_stream_parser_accepts_text_and_parallel_calls": 0.9,
    "test_grading.py::test_reference_policies_are_exactly_once_without_faults": 0.6,
    "test_guard_sqlite.py::test_a_key_recorded_before_a_kill_is_replayed_by_a_new_process": 0.4,
    "test_guard_sqlite.py::test_a_write_interrupted_by_a_kill_is_never_executed_twice": 0.6,
    "test_guard_sqlite.py::test_processes_racing_on_one_key_execute_it_once": 1.0,
    "test_harnesses_docs.py::test_the_mcp_agent_example_runs": 2.4,
    "test_hostile_adapters.py::test_an_adapter_that_exits_or_cancels_never_stops_the_grid": 1.5,
    "test_hostile_adapters.py::test_an_adapter_that_never_answers_ends_at_the_episode_timeout": 0.3,
    "test_hostile_adapters.py::test_twelve_cells_at_concurrency_four_with_one_hang_finish_at_the_timeout": 1.5,
    "test_hostile_cli.py::test_the_dry_run_counts_in_bounded_memory": 1.8,
    "test_hostile_secrets.py::test_a_gateway_account_id_and_api_version_are_not_mistaken_for_keys": 0.6,
    "test_hostile_secrets.py::test_a_key_anywhere_in_the_model_spec_is_refused_and_written_nowhere": 8.7,
    "test_hostile_store.py::test_a_corrupted_line_in_the_middle_is_quarantined_and_its_cell_runs_again": 2.7,
    "test_import_graph.py::test_the_package_has_no_cycle_even_through_type_checking_imports": 1.6,
    "test_import_graph.py::test_the_package_has_no_import_cycle": 0.6,
    "test_inspect_docs.py::test_inspect_page_runs_end_to_end": 1.8,
    "test_inspect_edges.py::test_an_unrecorded_cell_ends_as_model_error_and_is_not_rated": 0.6,
    "test_inspect_edges.py::test_epochs_are_refused_and_samples_without_a_record_are_reported": 1.2,
    "test_inspect_edges.py::test_inspect_json_log_format_is_read_too": 0.6,
    "test_inspect_optional.py::test_inspect_features_name_the_extra_without_it": 2.5,
    "test_inspect_optional.py::test_tasks_are_named_limbo_slash_grid_from_a_wheel_install_too": 7.8,
    "test_inspect_optional.py::test_the_core_runs_and_analyses_without_inspect": 8.0,
    "test_layers.py::test_each_floor_imports_only_the_floors_below_it": 0.4,
    "test_layers.py::test_the_check_fails_on_an_upward_import": 1.2,
    "test_layout.py::test_no_class_name_is_defined_twice": 0.5,
    "test_mcp_errors.py::test_every_bad_message_is_answered_over_stdio_as_over_http": 4.8,
    "test_mcp_server.py::test_a_client_that_cancels_a_held_call_changes_nothing": 0.5,
    "test_mcp_server.py::test_a_timed_out_call_is_held_only_when_asked_and_the_world_is_already_settled": 0.7,
    "test_one_reader.py::test_a_huge_record_is_read_and_a_huge_bad_line_is_skipped_with_a_short_reason": 0.7,
    "test_provider_options.py::test_forked_workers_price_and_cache_with_the_flags": 2.9,
    "test_provider_options.py::test_two_runs_one_after_the_other_each_see_only_their_own": 1.0,
    "test_packaging.py::test_a_wheel_records_the_commit_it_was_built_from": 1.3,
    "test_packaging.py::test_wheel_installs_only_limbo_and_works_outside_the_repo": 2.7,
    "test_pairing.py::test_prompt_arms_are_identical_for_reference_policies_over_e6": 1.0,
    "test_plugins.py::test_a_broken_installed_plugin_is_one_line_naming_it": 0.4,
    "test_plugins.py::test_a_grid_over_the_plugin_runs_and_grades": 0.5,
    "test_plugins.py::test_listing_services_with_a_plugin_service_does_not_crash": 0.7,
    "test_plugins.py::test_the_installed_plugin_is_listed_with_the_built_ins": 3.1,
    "test_plugins.py::test_the_plugin_harness_sends_the_prompt_before_the_task": 0.4,
    "test_plugins.py::test_the_policy_example_of_docs_plugins_runs_from_the_command_line": 1.1,
    "test_preflight.py::test_a_key_rejected_by_the_model_list_stops_before_anything_is_written": 0.6,
    "test_preflight.py::test_a_listed_model_costs_no_request": 0.6,
    "test_preflight.py::test_a_wrong_model_name_stops_the_run_with_one_line_and_no_cell": 0.5,
    "test_preflight.py::test_an_unlisted_name_the_server_answers_to_passes": 0.6,
    "test_preflight.py::test_each_distinct_model_is_asked_once": 0.8,
    "test_preflight.py::test_no_preflight_skips_the_call": 0.6,
    "test_providers_episodes.py::test_episode_through_sdk_matches_in_process_run": 0.8,
    "test_providers_episodes.py::test_retryable_failures_are_retried_and_leave_the_record_unchanged": 2.2,
    "test_providers_limits.py::test_a_wide_run_against_a_rate_limit_ends_without_model_errors": 3.4,
    "test_providers_wire.py::test_a_path_is_joined_to_the_base_url_exactly_as_the_sdk_joins_it": 0.6,
    "test_providers_wire.py::test_limbo_imports_without_any_vendor_sdk": 0.3,
    "test_proxy_docs.py::test_the_flags_shown_are_the_command_s_and_its_help_lists_the_modes": 0.4,
    "test_proxy_docs.py::test_the_worked_example_runs_as_written": 7.5,
    "test_records.py::test_every_record_and_event_of_the_default_grid_validates_against_the_schema": 4.5,
    "test_records.py::test_the_doc_shows_the_schema_the_command_prints": 0.4,
    "test_records.py::test_the_docs_validation_example_runs": 2.4,
    "test_records.py::test_the_edge_reads_every_record_back_to_the_same_json": 0.7,
    "test_release_records.py::test_the_stored_cells_record_the_same_bytes_apart_from_runtime": 1.8,
    "test_report.py::test_a_new_report_replaces_an_earlier_one_whole": 3.0,
    "test_report.py::test_errors_are_shown_with_their_reasons_and_input_problems_listed": 2.1,
    "test_report.py::test_every_table_and_figure_of_the_analysis_is_in_the_overview": 3.3,
    "test_report.py::test_odd_lines_still_give_strict_details": 1.9,
    "test_report.py::test_the_docs_commands_run_and_view_refuses_foreign_hosts": 8.5,
    "test_report.py::test_user_errors_are_one_line_and_touch_nothing": 8.6,
    "test_real_model_loop.py::test_a_chat_only_server_is_told_apart_by_the_preflight": 2.9,
    "test_real_model_loop.py::test_a_reply_reporting_a_failure_is_never_cached_nor_replayed": 4.5,
    "test_real_model_loop.py::test_a_server_failing_every_call_stops_the_run_early": 4.5,
    "test_real_model_loop.py::test_error_streak_zero_runs_every_cell": 2.0,
    "test_real_model_loop.py::test_forked_workers_stop_too": 1.1,
    "test_real_model_loop.py::test_the_cache_says_what_it_answered_and_knows_the_endpoint": 1.5,
    "test_real_model_loop.py::test_the_plan_line_counts_the_cells_left_after_retry_errors": 3.0,
    "test_retry_errors.py::test_a_crash_between_the_two_steps_counts_each_record_once": 4.1,
    "test_retry_errors.py::test_a_failing_server_then_a_retry_leaves_every_cell_done_once": 5.8,
    "test_retry_errors.py::test_a_shard_retries_only_its_own_cells": 2.0,
    "test_retry_errors.py::test_timeouts_are_retried_only_when_asked": 1.8,
    "test_run_dependencies.py::test_limbo_run_needs_only_the_core_dependencies": 1.2,
    "test_runs_docs.py::test_the_commands_of_the_runs_page_run": 2.0,
    "test_runs_docs.py::test_the_errors_by_reason_example_is_what_the_run_prints": 2.8,
    "test_runs_docs.py::test_the_stopped_early_example_is_what_the_run_prints": 3.8,
    "test_scale_docs.py::test_the_local_commands_run_and_do_what_the_page_says": 2.3,
    "test_secret_forms.py::test_a_key_echoed_in_base64_reaches_no_file_and_no_output": 0.7,
    "test_secrets.py::test_no_key_in_records_cache_logs_or_output": 23.6,
    "test_shared_run.py::test_a_429_storm_slows_both_workers_through_one_limiter": 3.1,
    "test_shared_run.py::test_an_in_process_run_records_no_shared_limiter": 0.7,
    "test_shared_run.py::test_max_cost_with_two_workers_stops_at_one_budget_and_resumes": 1.8,
    "test_transport_identity.py::test_a_server_on_another_port_resumes_the_same_run": 1.5,
    "test_transport_identity.py::test_built_in_grids_keep_their_ids": 1.0,
    "test_worldfile_check.py::test_a_broken_world_gives_one_line_at_the_broken_line": 0.7,
    "test_worldfile_cli.py::test_a_changed_world_file_is_another_grid_not_a_resume": 0.9,
    "test_worldfile_cli.py::test_a_changed_or_missing_world_file_is_named_by_episode_from_and_replay": 0.5,
    "test_worldfile_cli.py::test_a_grid_file_names_its_world_relative_to_itself": 0.5,
    "test_worldfile_cli.py::test_a_world_run_replays_under_replay_run_dir": 0.3,
    "test_worldfile_cli.py::test_episode_runs_a_world_cell_from_flags_and_from_a_stored_record": 0.4,
    "test_worldfile_cli.py::test_the_same_world_file_cell_and_seed_give_byte_identical_records_across_processes": 0.7,
    "test_worldfile_faithful.py::test_the_file_social_gives_the_python_social_outcome_on_every_cell": 8.5,
    "test_worldfile_rejects.py::test_the_real_command_line_refuses_them_too": 4.1,
    "test_worlds_docs.py::test_the_broken_file_gives_the_lines_shown": 0.6,
    "test_worlds_docs.py::test_the_quick_start_runs_and_gives_tables_3_5_and_13": 14.5,
}
"""Test file (or ``file::test``, all its parameters together) -> its measured wall seconds: the
tests that took over 0.3 s (or 0.6 s over all their parameters) in one run of the
fast set (``-m 'not slow and not harness and not ray and not browser' -vv``, the time between
consecutive results, a module fixture's setup counted to the test that first asks for it) on
the 2-core development machine, under the load of other work (load average 2 to 6). A file
goes in whole when all of its tests are here."""

MARKERS = ("slow", "harness", "ray", "browser")
"""The markers of this table, as ``pyproject.toml`` registers them."""


def marks_of(nodeid: str) -> tuple[str, ...]:
    """The markers the table gives the test ``nodeid`` (``tests/test_x.py::test_y[param]``)."""
    path, _, name = nodeid.partition("::")
    file = path.rsplit("/", 1)[-1]
    function = name.split("[", 1)[0]
    keys = (file, f"{file}::{function}")
    slow = ("slow",) if any(key in SLOW for key in keys) else ()
    return (*MARKS.get(file, ()), *MARKS.get(keys[1], ()), *slow)


def skipped_whole(file: str, markexpr: str) -> bool:
    """Whether ``-m markexpr`` deselects every test of ``file``, read from the table alone, so
    that the fast loop need not even import it (its imports are a good part of a fast run).
    Only the fast loop's form, ``not a and not b ...``, is read; any other expression says
    no, and pytest's own selection decides test by test."""
    if not re.fullmatch(r"not \w+( and not \w+)*", markexpr.strip()):
        return False
    excluded = set(re.findall(r"not (\w+)", markexpr))
    whole = {*MARKS.get(file, ()), *(("slow",) if file in SLOW else ())}
    return bool(excluded & whole)


HEAVY_FAMILIES = re.compile(r"harness|ray_|proxy|conform|grid_runner|hostile")
"""The test files of the second half (:func:`half_of`): those that start other processes — the
production harness CLIs, Ray clusters, upstream MCP servers, killed grid workers."""


def half_of(nodeid: str) -> str:
    """Which of the two fixed halves ``make test`` runs side by side (pytest-xdist's
    ``--dist loadgroup``, one worker a half) the test ``nodeid`` belongs to. Fixed by the file's
    name rather than left to xdist's load balancing, so that each worker runs the same tests in
    the same order every time, and a test that depends on what ran before it in its process
    fails every time or never. The rule splits the whole suite's time about in two (678 s and
    664 s in one measured run)."""
    file = nodeid.partition("::")[0].rsplit("/", 1)[-1]
    return "processes" if HEAVY_FAMILIES.search(file) else "in-process"
