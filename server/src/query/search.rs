//! The q/1 `search` shape: full-text search over the documents ingest indexes
//! (`telemetry::search`), and the snippets its rows show.
//!
//! Decisions:
//! - **Matching** is `roost_proto::search`'s: every word must be in a document, matched
//!   whole, case and diacritics ignored; the last also as a prefix from 3 characters.
//! - **Order.** Newest indexed first: by document id. Ids follow ingest order, which is
//!   time order for live senders. FTS5 reads its doclists in rowid order, so SQLite walks
//!   them backwards and stops at the limit, whatever the words.
//! - **PostgreSQL's two ways** ([`postgres_hits`]). Its GIN index is not in id order: a
//!   word's hits are all read from the table and sorted, which costs by how many there
//!   are (`please`, in every conversation: 2M table reads at 10M spans). Walking the id
//!   index backwards and testing each document costs by how far the newest hits lie
//!   (`nowhere`: the whole table, 2.6 s at 10M). The planner chooses by its statistics,
//!   which cannot tell a word no document holds from a rare one, and it chose the walk. So
//!   roost chooses, and writes both plans so PostgreSQL cannot pick the other: it walks
//!   the newest [`WALK`] documents first, which finds common words; when that finds too
//!   few, the hits it found give their rate, and roost walks on only if that is cheaper
//!   than reading the rest through GIN, which reads every document holding the words,
//!   whatever the filters (service, source, time) then keep: with filters, those are
//!   counted in the walked documents apart. A word common in old documents and rare in
//!   new ones is the slow case left: GIN reads all of its hits.
//! - **Whole words first.** A prefix is looked up by merging the lists of every word it
//!   starts, all of them, before the newest can be taken: 26 ms for a word in 200,000
//!   documents, where the word alone takes 0.3 ms. So the words are looked up whole
//!   first, and the last as a prefix only when that finds fewer hits than wanted; the
//!   two are merged newest first. A search for a whole word that is everywhere stays
//!   fast; a search as someone types (`lisb`) finds no whole word and takes the prefix.
//! - **Two reads.** The hits are read with only what grouping needs (id, session,
//!   trace), up to [`GROUP_SCAN`] for a grouped search; the rows answered are then read
//!   in full, with their text for the snippet.
//! - **Groups.** `group=conversation` (one row per session, or per trace for
//!   conversations without a session) and `group=trace` read at most [`GROUP_SCAN`] hits
//!   and fold them, newest first; a row's `hits` counts the hits read, so it is a lower
//!   bound when a word is common. On PostgreSQL the hits read once the groups are full
//!   are also bounded by the documents walked ([`GROUP_WALK`]), so its counts can be lower
//!   than SQLite's for a word in one document in a few hundred.
//! - **Snippets** are cut in Rust around the first matching word (one rule for both
//!   backends: `roost_proto::search::snippet`), on one line. A message document holds no
//!   text (the messages are stored once, in `message_texts`): its snippet is cut from its
//!   item's messages, read for the rows answered only.

use std::collections::HashMap;

use roost_proto::search::{Terms, snippet};
use serde_json::{Map, Value as Json};

use super::{
    args::Args,
    registry::{Col, ColKind},
    run::{Bind, ENVELOPE_BYTES, Fetched, Sql, fetch, like_escaped, select_list},
};
use crate::{
    Result,
    store::{BackendKind, Store, on_reader},
    telemetry::message_texts,
};

/// Most hits a grouped search reads to make its groups.
const GROUP_SCAN: i64 = 2_000;

/// Documents PostgreSQL walks first, newest first, before it weighs the GIN index
/// (about 15 ms at most).
const WALK: i64 = 20_000;

/// Documents a grouped search walks on PostgreSQL, once its groups are full, to count
/// their hits (about 40 ms): reading [`GROUP_SCAN`] hits of a word in one document in 150
/// meant walking 300,000 documents or reading 40,000 hits through GIN, 200 to 400 ms at
/// 10M spans.
const GROUP_WALK: i64 = 50_000;

/// What a hit read through PostgreSQL's GIN index costs, in documents walked. Hits are
/// spread over the table, a page each, where a walk reads ~30 documents a page in order:
/// measured at 6M documents, a GIN hit cost 1.5 walked documents with the table cached
/// and 30 without (40,000 hits: 60 ms against 25 s). 10 leans to the walk.
const GIN_HIT_COST: f64 = 10.0;

/// An FTS5 query: each word quoted (they hold letters and digits only), implicitly
/// ANDed, the last one a prefix (`"trip" "lisb"*`).
fn fts5(terms: &Terms) -> String {
    let mut out: Vec<String> = terms.words().iter().map(|w| format!("\"{w}\"")).collect();
    if terms.prefix()
        && let Some(last) = out.last_mut()
    {
        last.push('*');
    }
    out.join(" ")
}

/// A PostgreSQL `tsquery` literal (`'trip' & 'lisb':*`).
fn tsquery(terms: &Terms) -> String {
    let mut out: Vec<String> = terms.words().iter().map(|w| format!("'{w}'")).collect();
    if terms.prefix()
        && let Some(last) = out.last_mut()
    {
        last.push_str(":*");
    }
    out.join(" & ")
}

/// What a hit is read with: enough to group it (`_id` is read here, not answered).
const SCAN_COLUMNS: &[Col] = &[
    Col { name: "_id", sql: "d.id", kind: ColKind::Int },
    Col { name: "session_id", sql: "d.session_id", kind: ColKind::Text },
    Col { name: "trace_id", sql: "d.trace_id", kind: ColKind::Text },
];

/// An answered hit's columns (`_id` and `_text` are read here, not answered).
const ROW_COLUMNS: &[Col] = &[
    Col { name: "_id", sql: "id", kind: ColKind::Int },
    Col { name: "time", sql: "time_ns", kind: ColKind::Time },
    Col { name: "source", sql: "source", kind: ColKind::Text },
    Col { name: "session_id", sql: "session_id", kind: ColKind::Text },
    Col { name: "trace_id", sql: "trace_id", kind: ColKind::Text },
    Col { name: "span_id", sql: "span_id", kind: ColKind::Text },
    Col { name: "run_id", sql: "run_id", kind: ColKind::Text },
    Col { name: "service", sql: "service", kind: ColKind::Text },
    Col { name: "_text", sql: "text", kind: ColKind::Text },
    Col { name: "_time_ns", sql: "time_ns", kind: ColKind::Int },
];

/// Runs the `search` shape.
pub(super) async fn run(store: &Store, args: &Args) -> Result<Fetched> {
    let terms = Terms::parse(args.string("text").unwrap_or_default())?;
    let group = args.string("group").unwrap_or("hit");
    let limit = args.integer("limit");
    let scan = if group == "hit" { limit } else { GROUP_SCAN.max(limit) };
    let id = |row: &Map<String, Json>| row.get("_id").and_then(Json::as_i64).unwrap_or_default();
    let mut hits = read_hits(store, &terms.whole_words(), args, group, (scan, limit)).await?;
    let mut groups = fold_groups(&hits, group, limit as usize);
    // The prefix is looked up only when the whole words leave the answer short: fewer
    // hits than read, and fewer rows than asked once grouped.
    if terms.prefix() && (hits.len() as i64) < scan && groups.len() < limit as usize {
        let seen: std::collections::HashSet<i64> = hits.iter().map(id).collect();
        let more = read_hits(store, &terms, args, group, (scan, limit)).await?;
        hits.extend(more.into_iter().filter(|row| !seen.contains(&id(row))));
        hits.sort_by_key(|row| std::cmp::Reverse(id(row)));
        hits.truncate(scan as usize);
        groups = fold_groups(&hits, group, limit as usize);
    }
    let ids: Vec<i64> = groups.iter().map(id).collect();
    let (mut details, truncated) = rows_by_id(store, &ids).await?;
    let mut snippet_texts = messages_texts(store, &details).await?;
    let mut rows = Vec::with_capacity(groups.len());
    for group in groups {
        let Some(mut row) = details.remove(&id(&group)) else { continue };
        let mut text = row.remove("_text").and_then(|t| t.as_str().map(str::to_owned)).unwrap_or_default();
        row.remove("_time_ns");
        if let Some(messages) = snippet_texts.remove(&id(&row)) {
            text = messages;
        }
        row.remove("_id");
        row.insert("hits".to_owned(), group.get("hits").cloned().unwrap_or(Json::from(1)));
        row.insert("snippet".to_owned(), Json::String(snippet(&text, &terms)));
        rows.push(row);
    }
    let bytes = rows.iter().map(|r| Json::Object(r.clone()).to_string().len()).sum::<usize>() + ENVELOPE_BYTES;
    Ok(Fetched { rows, truncated, bytes })
}

/// The texts of the answered message documents, which hold none (migration 0034), by
/// document id: each document's item's messages, found by the item's time, trace and
/// span (the messages' time index), their texts read from `message_texts` at once, joined
/// as ingest joined them.
async fn messages_texts(store: &Store, rows: &HashMap<i64, Map<String, Json>>) -> Result<HashMap<i64, String>> {
    let field =
        |row: &Map<String, Json>, name: &str| row.get(name).and_then(Json::as_str).unwrap_or_default().to_owned();
    let mut wanted: Vec<(i64, Vec<i64>)> = Vec::new();
    for (&doc, row) in rows {
        if field(row, "source") != "message" || !field(row, "_text").is_empty() {
            continue;
        }
        let time_ns = row.get("_time_ns").and_then(Json::as_i64).unwrap_or_default();
        let (trace, span) = (field(row, "trace_id"), field(row, "span_id"));
        let ids: Vec<i64> = on_reader!(store, |pool| {
            sqlx::query_scalar(
                "SELECT text_id FROM messages WHERE time_ns = $1 AND COALESCE(trace_id, '') = $2 \
                 AND COALESCE(span_id, '') = $3 AND text_id IS NOT NULL ORDER BY id LIMIT 1000",
            )
            .bind(time_ns)
            .bind(&trace)
            .bind(&span)
            .fetch_all(pool)
            .await
        })?;
        wanted.push((doc, ids));
    }
    let all: Vec<i64> = wanted.iter().flat_map(|(_, ids)| ids.iter().copied()).collect();
    let texts = message_texts::read(store, &all).await?;
    Ok(wanted
        .into_iter()
        .map(|(doc, ids)| {
            let messages: Vec<(String, Option<String>)> =
                ids.iter().filter_map(|id| texts.get(id)).map(|t| (t.content(), t.tool_calls.clone())).collect();
            (doc, crate::telemetry::search::messages_text(&messages))
        })
        .collect())
}

/// How a hits query finds its documents.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Plan {
    /// SQLite: FTS5's doclists, newest first.
    Fts,
    /// PostgreSQL: the id index backwards over ids in `(above, upto]`, each document
    /// tested (the words are written so the GIN index cannot serve them).
    Walk { above: i64, upto: i64 },
    /// PostgreSQL: every hit with an id up to `upto` through the GIN index, sorted (the
    /// id is written so its index can serve neither the order nor the bound).
    Gin { upto: i64 },
}

/// The hits of `terms`, newest first, at most `scan` of them, for `limit` rows.
async fn read_hits(
    store: &Store,
    terms: &Terms,
    args: &Args,
    group: &str,
    (scan, limit): (i64, i64),
) -> Result<Vec<Map<String, Json>>> {
    match store.kind() {
        BackendKind::Sqlite => {
            Ok(fetch(store, hits_sql(terms, args, group, scan, Plan::Fts), SCAN_COLUMNS, 0).await?.rows)
        }
        BackendKind::Postgres => postgres_hits(store, terms, args, group, (scan, limit)).await,
    }
}

/// The document ids' range, `(lowest, highest)`, both 0 when there are none.
async fn id_range(store: &Store) -> Result<(i64, i64)> {
    const RANGE: &[Col] = &[
        Col { name: "lowest", sql: "COALESCE(MIN(id), 0)", kind: ColKind::Int },
        Col { name: "highest", sql: "COALESCE(MAX(id), 0)", kind: ColKind::Int },
    ];
    let mut sql = Sql::default();
    sql.text = format!("SELECT {} FROM search_docs", select_list(RANGE));
    let row = fetch(store, sql, RANGE, 0).await?.rows.into_iter().next().unwrap_or_default();
    let int = |name: &str| row.get(name).and_then(Json::as_i64).unwrap_or_default();
    Ok((int("lowest"), int("highest")))
}

/// PostgreSQL's hits: the newest [`WALK`] documents walked, then walked further or read
/// through GIN, whichever the rate of hits found so far says is cheaper (module docs). A
/// grouped search looks for the hits its missing groups need; once its `limit` groups
/// are full, it walks on only to count, up to [`GROUP_WALK`] documents.
async fn postgres_hits(
    store: &Store,
    terms: &Terms,
    args: &Args,
    group: &str,
    (scan, limit): (i64, i64),
) -> Result<Vec<Map<String, Json>>> {
    let (lowest, highest) = id_range(store).await?;
    let filtered = has_filters(args, group);
    let mut hits = Vec::new();
    let (mut upto, mut window, mut walked, mut holding) = (highest, WALK, 0i64, 0i64);
    // A grouped search's `limit` groups are full (folded once a window, after its hits).
    let mut full = false;
    while upto >= lowest && upto > 0 {
        let above = (upto - window).max(lowest - 1);
        let plan = Plan::Walk { above, upto };
        let found =
            fetch(store, hits_sql(terms, args, group, scan - hits.len() as i64, plan), SCAN_COLUMNS, 0).await?.rows;
        // What GIN would read is every document holding the words, whatever the filters
        // keep: with filters, those are counted in the window apart. Once a grouped
        // search's groups are full it only walks on to count: GIN is not weighed again,
        // so what it would read is not counted either.
        holding += match (filtered, full) {
            (_, true) => 0,
            (true, false) => holding_words(store, terms, above, upto).await?,
            (false, false) => found.len() as i64,
        };
        hits.extend(found);
        walked += upto - above;
        upto = above;
        if hits.len() as i64 >= scan || upto < lowest {
            break;
        }
        let wanted = if group == "hit" {
            scan - hits.len() as i64
        } else {
            let missing = limit - fold_groups(&hits, group, limit as usize).len() as i64;
            full = missing <= 0;
            if full {
                if walked >= GROUP_WALK {
                    break;
                }
                window = GROUP_WALK - walked;
                continue;
            }
            missing
        };
        let rates = Rates { hits: hits.len() as i64, holding, walked };
        match next_window(rates, wanted, upto - lowest + 1) {
            Some(next) => window = next,
            None => {
                let plan = Plan::Gin { upto };
                let rest = scan - hits.len() as i64;
                hits.extend(fetch(store, hits_sql(terms, args, group, rest, plan), SCAN_COLUMNS, 0).await?.rows);
                break;
            }
        }
    }
    Ok(hits)
}

/// Whether the hits query narrows the documents holding the words any further.
fn has_filters(args: &Args, group: &str) -> bool {
    group == "trace"
        || args.time("since").is_some()
        || args.time("until").is_some()
        || ["session_id", "trace_id", "source", "service_contains"].iter().any(|arg| args.string(arg).is_some())
}

/// Documents with ids in `(above, upto]` holding `terms`, the filters aside.
async fn holding_words(store: &Store, terms: &Terms, above: i64, upto: i64) -> Result<i64> {
    const COUNT: &[Col] = &[Col { name: "holding", sql: "COUNT(*)", kind: ColKind::Int }];
    let mut sql = Sql::default();
    let (above, upto) = (sql.bind(Bind::Int(above)), sql.bind(Bind::Int(upto)));
    let query = sql.bind(Bind::Text(tsquery(terms)));
    sql.text = format!(
        "SELECT {} FROM search_docs d WHERE d.id > {above} AND d.id <= {upto} \
         AND COALESCE(d.words, ''::tsvector) @@ {query}::tsquery",
        select_list(COUNT)
    );
    let row = fetch(store, sql, COUNT, 0).await?.rows.into_iter().next().unwrap_or_default();
    Ok(row.get("holding").and_then(Json::as_i64).unwrap_or_default())
}

/// What a PostgreSQL search has seen so far: `hits` (what the filters kept) and `holding`
/// (documents holding the words) among the newest `walked` documents.
#[derive(Debug, Clone, Copy)]
struct Rates {
    hits: i64,
    holding: i64,
    walked: i64,
}

/// With `wanted` more hits to find among `left` documents: how many to walk next, or
/// `None` when reading the rest through GIN costs less. Walking costs the documents
/// walked, at the rate the filters keep hits (half a hit when none was kept yet); GIN
/// costs every document holding the words, at their rate. A word nothing held yet goes
/// to GIN: it is rare here.
fn next_window(rates: Rates, wanted: i64, left: i64) -> Option<i64> {
    let walked = rates.walked.max(1) as f64;
    let walk = wanted as f64 / (rates.hits.max(0) as f64).max(0.5) * walked;
    let gin = rates.holding as f64 / walked * left as f64 * GIN_HIT_COST;
    // A quarter more than the rate says, so one more step usually ends it.
    (walk < gin).then(|| ((walk * 1.25) as i64).clamp(1, left))
}

/// The hits' query by `plan`: matching documents, newest first.
fn hits_sql(terms: &Terms, args: &Args, group: &str, scan: i64, plan: Plan) -> Sql {
    let mut sql = Sql::default();
    let (from, mut conditions, order) = match plan {
        Plan::Fts => {
            let query = sql.bind(Bind::Text(fts5(terms)));
            (
                "search_words JOIN search_docs d ON d.id = search_words.rowid",
                vec![format!("search_words MATCH {query}")],
                "search_words.rowid DESC",
            )
        }
        Plan::Walk { above, upto } => {
            let query = sql.bind(Bind::Text(tsquery(terms)));
            let (above, upto) = (sql.bind(Bind::Int(above)), sql.bind(Bind::Int(upto)));
            (
                "search_docs d",
                vec![
                    format!("d.id > {above}"),
                    format!("d.id <= {upto}"),
                    format!("COALESCE(d.words, ''::tsvector) @@ {query}::tsquery"),
                ],
                "d.id DESC",
            )
        }
        Plan::Gin { upto } => {
            let query = sql.bind(Bind::Text(tsquery(terms)));
            let upto = sql.bind(Bind::Int(upto));
            (
                "search_docs d",
                vec![format!("d.words @@ {query}::tsquery"), format!("d.id + 0 <= {upto}")],
                "d.id + 0 DESC",
            )
        }
    };
    if let Some(since) = args.time("since") {
        conditions.push(format!("d.time_ns >= {}", sql.bind(Bind::Int(since))));
    }
    if let Some(until) = args.time("until") {
        conditions.push(format!("d.time_ns <= {}", sql.bind(Bind::Int(until))));
    }
    for (arg, column) in [("session_id", "d.session_id"), ("trace_id", "d.trace_id"), ("source", "d.source")] {
        if let Some(value) = args.string(arg) {
            conditions.push(format!("{column} = {}", sql.bind(Bind::Text(value.to_owned()))));
        }
    }
    if let Some(service) = args.string("service_contains") {
        let pattern = sql.bind(Bind::Text(format!("%{}%", like_escaped(service))));
        conditions.push(format!("LOWER(d.service) LIKE LOWER({pattern}) ESCAPE '\\'"));
    }
    if group == "trace" {
        conditions.push("d.trace_id <> ''".to_owned());
    }
    let limit = sql.bind(Bind::Int(scan));
    sql.text = format!(
        "SELECT {} FROM {from} WHERE {} ORDER BY {order} LIMIT {limit}",
        select_list(SCAN_COLUMNS),
        conditions.join(" AND ")
    );
    sql
}

/// Hits folded into at most `limit` rows: each hit alone (`hit`), or one row per
/// conversation or trace holding its newest hit and the count of hits read (`hits`).
fn fold_groups(hits: &[Map<String, Json>], group: &str, limit: usize) -> Vec<Map<String, Json>> {
    let field =
        |row: &Map<String, Json>, name: &str| row.get(name).and_then(Json::as_str).unwrap_or_default().to_owned();
    let mut rows: Vec<Map<String, Json>> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for hit in hits {
        let key = match group {
            "trace" => format!("t:{}", field(hit, "trace_id")),
            "conversation" if !field(hit, "session_id").is_empty() => format!("s:{}", field(hit, "session_id")),
            "conversation" if !field(hit, "trace_id").is_empty() => format!("t:{}", field(hit, "trace_id")),
            _ => format!("h:{}", hit.get("_id").and_then(Json::as_i64).unwrap_or_default()),
        };
        if let Some(&at) = index.get(&key) {
            if let Some(Json::Number(n)) = rows[at].get_mut("hits") {
                *n = (n.as_i64().unwrap_or(1) + 1).into();
            }
            continue;
        }
        if rows.len() == limit {
            // Every group is full; later hits only add to counts.
            if group == "hit" {
                break;
            }
            continue;
        }
        let mut row = hit.clone();
        row.insert("hits".to_owned(), Json::from(1));
        index.insert(key, rows.len());
        rows.push(row);
    }
    rows
}

/// The answered hits' rows (with their `_text`), by id, and whether some were left out
/// for the answer's byte budget (documents of 64 KiB each, 500 of them).
async fn rows_by_id(store: &Store, ids: &[i64]) -> Result<(HashMap<i64, Map<String, Json>>, bool)> {
    if ids.is_empty() {
        return Ok((HashMap::new(), false));
    }
    let mut sql = Sql::default();
    let list: Vec<String> = ids.iter().map(|id| sql.bind(Bind::Int(*id))).collect();
    sql.text = format!("SELECT {} FROM search_docs WHERE id IN ({})", select_list(ROW_COLUMNS), list.join(", "));
    let fetched = fetch(store, sql, ROW_COLUMNS, ENVELOPE_BYTES).await?;
    let rows = fetched.rows.into_iter().map(|row| (row.get("_id").and_then(Json::as_i64).unwrap_or_default(), row));
    Ok((rows.collect(), fetched.truncated))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_quote_every_word_and_make_the_last_a_prefix() {
        let terms = Terms::parse("Trip  to LISB").unwrap();
        assert_eq!(fts5(&terms), r#""trip" "to" "lisb"*"#);
        assert_eq!(tsquery(&terms), "'trip' & 'to' & 'lisb':*");
        assert_eq!(fts5(&Terms::parse("São pa").unwrap()), r#""sao" "pa""#, "two letters match whole");
        assert_eq!(tsquery(&Terms::parse("a' OR 1=1 --").unwrap()), "'a' & 'or' & '1'");
    }

    #[test]
    fn postgres_walks_on_while_the_rate_says_walking_is_cheaper() {
        let unfiltered = |hits| Rates { hits, holding: hits, walked: WALK };
        // Nothing in the newest documents: the word is rare here, GIN reads its hits.
        assert_eq!(next_window(unfiltered(0), 50, 6_000_000), None);
        // One in 1,000, 2,000 wanted of 6M: walking 2M costs more than reading 6,000 hits.
        assert_eq!(next_window(unfiltered(20), 1_980, 6_000_000), None);
        // One in 150 (`lisbon`), 2,000 wanted: walking 280k costs less than 40,000 hits.
        let next = next_window(unfiltered(133), 1_867, 6_000_000).unwrap();
        assert!((340_000..=360_000).contains(&next), "{next}");
        // One in 150, 50 wanted: walk about 7,500 more (a quarter over the rate).
        let next = next_window(unfiltered(133), 50, 6_000_000).unwrap();
        assert!((9_000..=9_500).contains(&next), "{next}");
        // Filters keep one hit in ten of `lisbon`'s: GIN would still read all 40,000.
        let filtered = Rates { hits: 13, holding: 133, walked: WALK };
        let next = next_window(filtered, 37, 6_000_000).unwrap();
        assert!((70_000..=72_000).contains(&next), "{next}");
        // The filters kept nothing yet, the words are common: walk on.
        assert!(next_window(Rates { hits: 0, holding: 6_000, walked: WALK }, 50, 6_000_000).is_some());
        // Never past the documents left.
        assert_eq!(next_window(Rates { hits: 10_000, holding: 10_000, walked: WALK }, 30_000, 40_000), Some(40_000));
    }

    #[test]
    fn groups_keep_the_newest_hit_and_count_the_rest() {
        let hit = |id: i64, session: &str, trace: &str| {
            let mut row = Map::new();
            row.insert("_id".into(), id.into());
            row.insert("session_id".into(), session.into());
            row.insert("trace_id".into(), trace.into());
            row
        };
        let hits = vec![hit(9, "s1", "t1"), hit(8, "", "t2"), hit(7, "s1", "t3"), hit(6, "", "t2"), hit(5, "s2", "t4")];
        let ids = |rows: &[Map<String, Json>]| {
            rows.iter().map(|r| (r["_id"].as_i64().unwrap(), r["hits"].as_i64().unwrap())).collect::<Vec<_>>()
        };
        assert_eq!(ids(&fold_groups(&hits, "conversation", 10)), [(9, 2), (8, 2), (5, 1)]);
        assert_eq!(ids(&fold_groups(&hits, "trace", 2)), [(9, 1), (8, 2)]);
        assert_eq!(ids(&fold_groups(&hits, "hit", 2)), [(9, 1), (8, 1)]);
    }
}
