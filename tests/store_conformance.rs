//! The store conformance suite: what every store behind the actors'
//! `Store` and the services' `ReadModel` must do, whatever engine holds the
//! bytes. Each check is written once against a [`harness::Harness`] and
//! instantiated for every store the daemon can open, so a second store
//! passes exactly the checks the first one does.
//!
//! - [`records`]: each `Write` kind lands where its reads find it.
//! - [`guards`]: a guarded write that finds the wrong state refuses its
//!   whole batch, events included.
//! - [`events`]: the event log is dense, in commit order, paged by cursor.
//! - [`durability`]: what was durable before a crash is there after it;
//!   grouped commits answer only once applied, and flush.
//! - [`memory`]: agents' notes and their search.
//! - [`side`]: the stores outside the batch path (instances, inbound
//!   events and schedules, approvals, context records).
//! - [`replays`]: recorded turn inputs, and replays with their reports.
//! - [`views`]: an operator's reads of one agent, or a page of them, in
//!   one go.
//! - [`upgrade`]: a PostgreSQL log from before events were numbered by
//!   slot.

#[path = "store_conformance/durability.rs"]
mod durability;
#[path = "store_conformance/events.rs"]
mod events;
#[path = "store_conformance/fixtures.rs"]
mod fixtures;
#[path = "store_conformance/guards.rs"]
mod guards;
#[path = "store_conformance/harness.rs"]
mod harness;
#[path = "store_conformance/memory.rs"]
mod memory;
#[path = "support/postgres.rs"]
mod pg_server;
#[path = "store_conformance/records.rs"]
mod records;
#[path = "store_conformance/replays.rs"]
mod replays;
#[path = "store_conformance/side.rs"]
mod side;
#[path = "store_conformance/upgrade.rs"]
mod upgrade;
#[path = "store_conformance/views.rs"]
mod views;

/// Instantiates every check of the suite for one harness, each as a test
/// named after the check inside a module named after the store.
macro_rules! conformance {
    ($store:ident, $harness:ty, $ready:expr, [$($module:ident :: $check:ident),* $(,)?]) => {
        mod $store {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    if $ready.await {
                        crate::$module::$check::<$harness>().await;
                    }
                }
            )*
        }
    };
}

/// Every check, for one store.
macro_rules! every_check {
    ($store:ident, $harness:ty, $ready:expr) => {
        conformance!(
            $store,
            $harness,
            $ready,
            [
                records::an_agent_is_found_by_id_and_name_and_listed,
                records::a_private_child_is_indexed_under_its_supervisor_while_live,
                records::messages_keep_their_pending_and_dedupe_indexes,
                records::a_message_written_twice_in_one_batch_reads_as_its_last_write,
                records::the_newest_settled_messages_pass_over_pending_ones,
                records::tasks_are_found_by_owner_and_worktree_until_removed,
                records::waits_are_found_by_owner_and_trigger_token,
                records::work_items_give_the_agent_its_focus,
                records::command_output_is_read_from_an_offset_and_dropped_from_the_front,
                records::cleanup_intents_are_read_by_recovery_until_deleted,
                records::workspaces_and_usage_are_kept_per_agent,
                records::recovery_reads_what_is_unfinished,
                views::an_agent_view_and_a_page_read_what_the_single_reads_do,
                guards::a_taken_name_refuses_the_whole_batch,
                guards::a_child_needs_a_live_supervisor,
                guards::a_live_update_never_revives_an_ended_agent,
                guards::a_task_and_a_wait_end_once,
                guards::a_requeue_applies_only_to_a_message_still_in_its_turn,
                guards::only_an_archived_agent_is_deleted_and_its_name_freed,
                events::cursors_are_dense_and_in_commit_order,
                events::a_page_starts_after_its_cursor,
                events::the_watermark_follows_durable_events,
                events::grouped_commits_keep_each_batch_s_events_together,
                events::each_slot_numbers_its_events_densely_in_commit_order,
                events::the_retention_removes_old_events_and_no_number_is_given_twice,
                durability::durable_writes_survive_a_crash,
                durability::a_clean_close_keeps_everything_committed,
                durability::a_refused_batch_in_a_group_leaves_the_others_applied,
                durability::a_batch_that_may_end_an_agent_moves_the_count,
                memory::a_note_is_replaced_by_its_key_and_read_back,
                memory::notes_are_paged_oldest_first,
                memory::a_tree_of_agents_keeps_a_bounded_number_of_notes,
                memory::no_note_is_kept_for_an_agent_that_has_ended_or_never_was,
                memory::notes_handled_messages_and_tool_calls_are_found,
                memory::a_deleted_memory_is_never_found,
                memory::a_query_is_words_phrases_and_signs_only,
                memory::a_search_past_its_budget_is_stopped,
                side::an_instance_is_swapped_only_from_the_digest_it_expects,
                side::an_inbound_event_is_kept_once_per_dedupe_key,
                side::a_webhook_body_is_a_replay_within_its_window,
                side::schedule_states_are_kept_until_their_instance_is_forgotten,
                side::an_approval_is_decided_once_and_listed_while_open,
                side::context_records_are_replaced_and_forgotten,
                replays::turn_inputs_keep_the_newest_and_share_their_role_and_catalog,
                replays::replays_and_their_reports_are_paged_and_deleted,
            ]
        );
    };
}

every_check!(sled, crate::harness::Sled, async { true });
every_check!(
    postgres,
    crate::harness::Postgres,
    crate::pg_server::available()
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_log_from_before_slots_is_numbered_on_from_one() {
    upgrade::a_log_from_before_slots_is_numbered_on_from_one().await;
}
