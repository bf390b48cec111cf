//! The Backend contract suite: one set of cases, run in-process against
//! every tier through the `Backend` trait (src/backend/mod.rs;
//! docs/contract.md § Backend protocol).
//!
//! Each case is a plain function `fn(&Tier)` in the module of its section;
//! [`contract_suite!`] makes one `#[test]` per case and backend, so a
//! failure names both: `state::writes::create_only_refuses_an_existing_file`.
//! The backends, each on fresh storage per test (`harness`):
//! - `state`, `store`, `fs`: one tier on its own, mounted where the default
//!   configuration mounts it (`/`, `/memories` on RocksDB in a temporary
//!   directory, `/workspace` on a temporary directory);
//! - `object`: the object tier at `/shared`, on the test process's
//!   versitygw (`tests/support/s3.rs`; a key prefix of its own per case);
//! - `composite::root`, `composite::memories`, `composite::workspace`: the
//!   mount table holding State, Store and Filesystem, as `src/startup.rs`
//!   builds it, with the case working in one of those mounts;
//!   `composite::shared` adds the object tier and works in it;
//! - `branch::state`, `branch::store`, `branch::fs`, `branch::object` and
//!   `branch::composite::{root, memories, workspace, shared}`: the same, every call
//!   made in a branch forked at the mount root (`harness::fork`, as the
//!   service forks), through the branch's overlay (docs/branches.md § What
//!   differs from the base; the cases branch on `Tier::branch` there).
//!
//! Sections: listing, reads, writes, edits, deletes, chunks, search,
//! errors, concurrency, scopes, changesets, history (versions, tombstones, restores,
//! retention) and changes (the change log: order, cursors, roots, expiry),
//! Move, Copy.
//!
//! Cases work below `{mount}/case`. Where tiers legitimately differ
//! (explicit or implied directories, creation times, who shares files),
//! the case branches on a flag of the `Tier` and asserts each branch
//! exactly. `table` holds the few cases only the mount table decides
//! (Moves across mounts), run once.
//!
//! Running it (release profile, like every test here):
//! - everything: `cargo test --release --test contract`;
//! - one backend: `cargo test --release --test contract -- state::`
//!   (`store::`, `fs::`, `composite::`, `composite::memories::`);
//! - one section on every backend: `... -- ::moves::`;
//! - one case on every backend: `... -- ::a_tree_moves`.
//!
//! A new tier joins by getting a `Kind`, built in `harness::open` with its
//! public constructor and mounted in the Composite there, and one
//! `contract_suite!` line below for it alone (and one inside `composite`
//! for its mount); it is accepted when every case passes on both.

#[path = "../support/s3.rs"]
mod s3;

mod changes;
mod changesets;
mod chunks;
mod concurrency;
mod copies;
mod deletes;
mod edits;
mod errors;
mod harness;
mod history;
mod listing;
mod moves;
mod reads;
mod scopes;
mod search;
mod table;
mod writes;

/// One `#[test]` per case of one section, on the backend of `$setup`.
macro_rules! section {
    ($setup:expr, $section:ident: $($case:ident),+ $(,)?) => {
        mod $section {
            use crate::harness::{Kind, Setup, Tier};

            $(
                #[test]
                fn $case() {
                    let tier = Tier::new($setup);
                    crate::$section::$case(&tier);
                }
            )+
        }
    };
}

/// Every case of every section on the backend of `$setup`, in a module
/// named `$backend`. A case missing here is dead code, which the build
/// refuses (`-D warnings`).
macro_rules! contract_suite {
    ($backend:ident, $setup:expr) => {
        mod $backend {
            section!($setup, listing:
                sorted_by_path_in_order_key_order,
                a_directory_is_listed_once,
                a_listed_file_is_its_stat,
                listing_a_file_is_not_directory,
                listing_a_missing_path_is_not_found,
                the_mount_root_always_lists,
                parents_of_a_file_are_directories,
                a_directory_after_its_last_file,
                stat_of_a_file_matches_its_write,
                stat_of_a_missing_path_is_not_found,
                names_are_exact,
            );
            section!($setup, reads:
                read_returns_the_content_and_its_stat,
                an_empty_file_reads_as_nothing,
                read_sees_the_latest_write,
                reading_a_directory_is_is_directory,
                reading_a_missing_file_is_not_found,
                an_admitted_read_asks_before_it_answers,
            );
            section!($setup, writes:
                a_write_creates_a_file_and_reports_it,
                a_rewrite_gets_a_larger_version,
                a_rewrite_keeps_the_created_time,
                create_only_refuses_an_existing_file,
                create_only_creates_a_missing_file,
                if_version_zero_creates_a_missing_file,
                if_version_zero_refuses_an_existing_file,
                a_matching_if_version_replaces,
                a_stale_if_version_is_refused,
                if_version_on_a_missing_file_is_refused,
                versions_only_grow_across_delete_and_recreate,
                writing_a_directory_is_is_directory,
                writing_below_a_file_is_not_directory,
                writing_deep_below_a_file_names_the_file,
                a_write_creates_missing_parents,
                the_executable_bit_is_kept_until_a_write_names_it,
            );
            section!($setup, edits:
                update_replaces_the_content_with_the_closure_result,
                a_failing_closure_leaves_the_file_unchanged,
                update_checks_if_version,
                updating_a_missing_file_is_not_found,
                updating_a_directory_is_is_directory,
                update_grows_and_shrinks_a_file,
            );
            section!($setup, deletes:
                deleting_a_file_removes_only_it,
                delete_with_a_matching_if_version,
                delete_with_a_stale_if_version_is_refused,
                a_directory_needs_recursive,
                a_recursive_delete_counts_the_files_of_the_tree,
                recursive_on_a_file_deletes_it,
                if_version_on_a_directory_is_invalid_argument,
                deleting_a_missing_path_is_not_found,
                deleting_an_emptied_directory,
                a_deleted_tree_can_be_rewritten,
            );
            section!($setup, chunks:
                read_chunks_reassemble_a_large_file,
                read_chunks_of_small_and_empty_files,
                read_chunks_refuses_directories_and_missing_files,
                write_chunks_assembles_the_pieces,
                a_failed_upload_changes_nothing,
                write_chunks_checks_the_precondition,
                large_and_small_files_replace_each_other,
            );
            section!($setup, search:
                glob_results_come_in_path_order,
                glob_star_stays_in_one_directory,
                glob_results_carry_the_files_metadata,
                hidden_names_are_skipped_and_counted,
                default_ignored_names_are_pruned_and_counted,
                max_results_stops_the_search,
                max_visited_stops_the_walk,
                a_budget_spent_without_results_is_timeout,
                grep_reports_lines_in_path_order,
                grep_context_lines,
                grep_skips_binary_files,
                grep_max_results_cuts_lines,
                grep_on_a_file_searches_it_alone,
                glob_on_a_file_is_not_directory,
                searching_a_missing_root_is_not_found,
                searching_from_the_mount_root,
                ignore_files_apply_where_the_tier_honours_them,
            );
            section!($setup, errors:
                a_missing_file_is_not_found_by_every_operation,
                a_missing_ancestor_still_names_the_requested_path,
                a_path_below_a_file_does_not_exist,
                every_file_operation_on_a_directory_is_is_directory,
                the_mount_root_is_a_directory_to_every_file_operation,
                a_file_over_the_size_limit_is_too_large,
            );
            section!($setup, concurrency:
                concurrent_updates_lose_nothing,
                one_create_only_writer_wins,
                one_if_version_writer_wins,
                readers_never_see_a_torn_file,
                concurrent_writes_into_new_directories_all_land,
            );
            section!($setup, scopes:
                scopes_see_what_their_tier_shares,
            );
            section!($setup, changesets:
                a_changeset_applies_every_file,
                a_stale_file_refuses_the_whole_changeset,
                absence_and_checks_are_conditions_too,
                a_put_that_cannot_be_a_file_changes_nothing,
                a_changeset_is_logged_together,
                a_changeset_keeps_history,
                concurrent_changesets_serialize,
                a_changeset_keeps_or_sets_the_executable_bit,
            );
            section!($setup, history:
                versions_are_listed_newest_first_with_their_origin,
                old_versions_read_back_as_written,
                a_deleted_file_keeps_a_tombstone,
                a_restore_writes_an_old_version_back,
                a_deleted_file_is_restored,
                a_restore_checks_if_version,
                tombstones_and_unknown_versions_are_refused,
                a_move_leaves_a_tombstone_at_the_source,
                a_directory_has_no_versions,
                the_last_ten_versions_are_kept,
            );
            section!($setup, changes:
                changes_come_in_commit_order,
                a_cursor_resumes_exactly_after_its_change,
                the_head_skips_the_past,
                a_root_filters_changes_and_keeps_the_place,
                a_recursive_delete_logs_every_file,
                a_move_logs_both_ends,
                a_failed_change_logs_nothing,
                a_position_in_another_log_is_expired,
                a_signal_fires_after_a_change,
                concurrent_changes_are_each_logged_once,
            );
            section!($setup, moves:
                a_file_moves,
                a_moved_file_outranks_every_earlier_version,
                an_earlier_if_version_never_matches_the_moved_file,
                a_tree_moves,
                a_moved_tree_leaves_its_neighbours,
                a_moved_tree_is_found_at_its_new_place,
                create_only_refuses_an_existing_destination,
                create_only_moves_to_a_missing_destination,
                a_matching_if_version_moves,
                a_stale_if_version_is_refused,
                if_version_on_a_directory_is_invalid_argument,
                a_destination_below_a_file_is_not_directory,
                a_directory_onto_an_existing_path_is_already_exists,
                a_file_onto_a_directory_is_is_directory,
                a_file_replaces_a_file,
                a_missing_source_is_not_found,
                missing_parents_of_the_destination_are_created,
                a_move_within_the_same_directory,
                the_mount_root_cannot_be_moved,
                the_first_failing_check_answers,
                the_source_directory_after_its_last_file_moves,
                an_empty_directory_moves_where_directories_are_real,
                racing_moves_of_one_file_have_one_winner,
            );
            section!($setup, copies:
                a_file_copies,
                the_copy_is_a_file_of_its_own,
                a_large_file_copies_whole,
                create_only_refuses_an_existing_destination,
                a_copy_replaces_a_file_under_if_version,
                a_missing_source_is_not_found,
                parents_are_created_and_a_directory_is_not_replaced,
                a_copy_is_logged_as_a_write,
            );
        }
    };
}

contract_suite!(state, Setup::Single(Kind::State));
contract_suite!(store, Setup::Single(Kind::Store));
contract_suite!(fs, Setup::Single(Kind::Filesystem));
contract_suite!(object, Setup::Single(Kind::Object));

/// The mount table holding all three tiers, each case run in each mount.
mod composite {
    contract_suite!(root, Setup::Composite(Kind::State));
    contract_suite!(memories, Setup::Composite(Kind::Store));
    contract_suite!(workspace, Setup::Composite(Kind::Filesystem));
    contract_suite!(shared, Setup::Composite(Kind::Object));
}

/// Every case again, each call made in a branch forked at the mount root
/// (docs/branches.md § Working in a branch): the overlay over each tier
/// that takes branches, alone and in the mount table.
mod branch {
    contract_suite!(state, Setup::Branch(Kind::State));
    contract_suite!(store, Setup::Branch(Kind::Store));
    contract_suite!(fs, Setup::Branch(Kind::Filesystem));
    contract_suite!(object, Setup::Branch(Kind::Object));

    mod composite {
        contract_suite!(root, Setup::CompositeBranch(Kind::State));
        contract_suite!(memories, Setup::CompositeBranch(Kind::Store));
        contract_suite!(workspace, Setup::CompositeBranch(Kind::Filesystem));
        contract_suite!(shared, Setup::CompositeBranch(Kind::Object));
    }
}
