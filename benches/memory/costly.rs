//! The costly-query phase: a kilobyte of what tantivy's query parser reads
//! as range, prefix and field clauses, searched through the store (which
//! reads it as plain words) and, in the same run, through tantivy's own
//! lenient parser on the same index: what such a query cost before the
//! store stopped handing agents' text to the parser.

use std::path::Path;
use std::time::Instant;

use holarchy::store::SledStore;
use holarchy_actors::MemoryStore;
use holarchy_supervision::AgentId;
use tantivy::collector::TopDocs;
use tantivy::query::QueryParser;
use tantivy::Index;

/// About 1 KiB of clauses the parser expands over the term dictionary.
pub fn query() -> String {
    let clauses = [
        "text:[a TO z]",
        "key:{a TO zz}",
        "tags:[0 TO 9]",
        "ka*",
        "text:[b TO y]",
        "lo*",
    ];
    let mut out = String::new();
    for clause in clauses.iter().cycle() {
        if out.len() + clause.len() + 1 > 1024 {
            break;
        }
        out.push_str(clause);
        out.push(' ');
    }
    out
}

/// Latencies in microseconds, sorted, of `count` searches of [`query`]
/// through the store, each for one of `agents`; an error ends the phase.
pub fn through_store(store: &SledStore, agents: &[AgentId], count: usize) -> Vec<f64> {
    let query = query();
    let mut latencies = Vec::with_capacity(count);
    for i in 0..count {
        let started = Instant::now();
        match store.search_memory(agents[i % agents.len()], &query, &[], 10) {
            Ok(_) => latencies.push(started.elapsed().as_secs_f64() * 1e6),
            Err(err) => {
                eprintln!("costly query through the store: {err}");
                break;
            }
        }
    }
    latencies.sort_by(f64::total_cmp);
    latencies
}

/// Latencies in microseconds, sorted, of `count` searches of [`query`]
/// parsed by tantivy's lenient parser over the store's index in `dir`
/// (every agent's entries: the parser's clauses are not per agent).
pub fn through_parser(dir: &Path, count: usize) -> Vec<f64> {
    let index = match Index::open_in_dir(dir) {
        Ok(index) => index,
        Err(err) => {
            eprintln!("the index for the parser's reference: {err}");
            return Vec::new();
        }
    };
    let schema = index.schema();
    let fields = ["text", "key", "tags"]
        .iter()
        .filter_map(|name| schema.get_field(name).ok())
        .collect();
    let parser = QueryParser::for_index(&index, fields);
    let Ok(reader) = index.reader() else {
        return Vec::new();
    };
    let searcher = reader.searcher();
    let query = query();
    let mut latencies = Vec::with_capacity(count);
    for _ in 0..count {
        let started = Instant::now();
        let (parsed, _) = parser.parse_query_lenient(&query);
        if searcher.search(&parsed, &TopDocs::with_limit(10)).is_err() {
            break;
        }
        latencies.push(started.elapsed().as_secs_f64() * 1e6);
    }
    latencies.sort_by(f64::total_cmp);
    latencies
}
