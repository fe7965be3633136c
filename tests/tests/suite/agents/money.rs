//! Every path that moves money, raced: five concurrent calls on each of ten agents, over
//! REST and gRPC at once. Afterwards the ledger must add up to the balance, and no instance
//! may have two provision charges, two refunds, two renewals of one period or two charges
//! of one turn (the store refuses those too: migration 0008).

use std::time::Duration;

use roost_proto::v1::DestroyRequest;
use roost_server::billing::prices::PriceBook;
use roost_tests::{Api, Backend, Reply, TestAccount, TestServer, each_backend};
use serde_json::{Value, json};

use super::{
    billing::{Answer, fake_upstream},
    start,
};

each_backend!(
    racing_destroys_refund_each_agent_once,
    racing_pauses_resumes_and_configs_move_no_money,
    racing_resumes_of_suspended_agents_pay_one_renewal_each,
    renewals_racing_lifecycle_calls_charge_each_period_once,
    racing_metered_turns_charge_each_turn_once,
    twenty_agents_messaged_at_once_overdraw_by_at_most_one_turn,
    credits_past_the_balance_ceiling_are_refused,
    a_thousand_turns_below_a_cent_move_the_balance_exactly,
    ledgers_kept_in_cents_migrate_exactly
);

const AGENTS: usize = 10;
const RACERS: usize = 5;

/// Provisions `n` agents of `runtime` one after the other (a deploy settles before the
/// next), each running; their ids.
async fn running_agents(api: &Api, runtime: &str, n: usize) -> Vec<String> {
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        let id = api.provision(runtime, &format!("agent {i}")).await["id"].as_str().unwrap().to_owned();
        api.wait_status(&id, "running").await;
        ids.push(id);
    }
    ids
}

/// Spends the account's free first month on a priced agent that is destroyed at once (a
/// free period refunds nothing), so the agents a test makes next all pay.
pub(super) async fn use_up_free_month(api: &Api) {
    let free = api.provision("echo-paid", "takes the free month").await;
    assert_eq!(free["charged_cents"], 0, "{free}");
    let id = free["id"].as_str().unwrap();
    api.wait_status(id, "running").await;
    api.post(&format!("/api/instances/{id}/destroy"), json!({})).await.ok();
}

/// Runs `RACERS` copies of `call` on every agent at once; the answers per agent.
async fn race<F, Fut>(ids: &[String], call: F) -> Vec<Vec<Reply>>
where
    F: Fn(String, usize) -> Fut,
    Fut: std::future::Future<Output = Reply> + Send + 'static,
{
    let handles: Vec<Vec<_>> =
        ids.iter().map(|id| (0..RACERS).map(|racer| tokio::spawn(call(id.clone(), racer))).collect()).collect();
    let mut out = Vec::with_capacity(handles.len());
    for agent in handles {
        let mut replies = Vec::with_capacity(RACERS);
        for handle in agent {
            replies.push(handle.await.expect("racer"));
        }
        out.push(replies);
    }
    out
}

/// A gRPC destroy, answered as the REST client would see it (status and code).
async fn grpc_destroy(server: &TestServer, key: &str, id: String) -> Reply {
    let mut client = server.agents(key).await;
    match client.destroy(DestroyRequest { instance_id: id }).await {
        Ok(done) => Reply { status: 200, body: json!({"refunded_nanocents": done.get_ref().refunded_nanocents}) },
        Err(status) => {
            let err = roost_proto::ApiError::from_status(&status);
            Reply {
                status: err.reason().http_status().as_u16(),
                body: json!({"error": err.message(), "code": err.reason().code()}),
            }
        }
    }
}

/// The books of `account`: the ledger's sum equals the balance, and nothing was moved
/// twice for one reason. Returns the balance.
/// Waits until no credits are held: every call's estimate released, and the gateway's
/// credit windows given back once idle (`roost_server::billing::windows::IDLE_RELEASE`).
pub(super) async fn assert_holds_released(server: &TestServer) {
    let mut held = Vec::new();
    for _ in 0..100 {
        held = server.sql("SELECT COUNT(*) FROM credit_holds").await.unwrap();
        if held == [0] {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(held, [0], "every hold released");
}

/// Asserts the account's ledger adds up to its balance and no movement is there twice; the
/// balance. A model call's charge is written just after its answer (the gateway's writer),
/// so it reads until the books stand still.
/// Nanocents in a cent: money is kept exactly, in nanocents, and the `*_cents` fields round it.
pub(super) const NC: i64 = 1_000_000_000;

/// Waits until the account's ledger adds up to its balance, exactly (in nanocents), and no
/// movement was made twice for one reason; the balance, in nanocents.
pub(super) async fn assert_books_balance(server: &TestServer, account: &TestAccount) -> i64 {
    let api = server.api(Some(account));
    let read_balance = || async { api.get("/api/account").await.ok()["balance_nanocents"].as_i64().unwrap() };
    let stored_sum = format!(
        "SELECT CAST(COALESCE(SUM(amount_nanocents), 0) AS BIGINT) FROM ledger WHERE account_id = '{}'",
        account.id
    );
    let (mut balance, mut sum, mut shown, mut ledger): (i64, i64, Option<i64>, Value) = (0, 0, None, Value::Null);
    for _ in 0..40 {
        balance = read_balance().await;
        sum = server.sql(&stored_sum).await.unwrap()[0];
        // The rows the API lists add up too, when it lists them all (up to 500).
        ledger = api.get("/api/account/ledger?limit=500").await.ok();
        let charges = ledger["charges"].as_array().unwrap();
        shown = (charges.len() < 500).then(|| charges.iter().map(|c| c["amount_nanocents"].as_i64().unwrap()).sum());
        if sum == balance && shown.is_none_or(|s| s == balance) && read_balance().await == balance {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(sum, balance, "the ledger adds up to the balance exactly");
    assert!(shown.is_none_or(|s| s == balance), "the ledger shown adds up to the balance: {ledger}");
    let twice = server
        .sql(&format!(
            "SELECT COUNT(*) FROM (SELECT instance_id, kind, period_start, turn_id, call_id FROM ledger \
             WHERE account_id = '{}' AND kind IN ('provision', 'refund', 'renewal', 'usage') \
             GROUP BY instance_id, kind, period_start, turn_id, call_id HAVING COUNT(*) > 1) AS repeated",
            account.id
        ))
        .await
        .unwrap();
    assert_eq!(twice, [0], "money moved twice for one reason: {ledger}");
    balance
}

fn count(replies: &[Reply], status: u16) -> usize {
    replies.iter().filter(|r| r.status == status).count()
}

async fn racing_destroys_refund_each_agent_once(backend: Backend) {
    let server = start(backend, |_| {}).await;
    let account = server.account(10_000).await;
    let api = server.api(Some(&account));
    // The free month goes first; the ten racing ones cost 100 cents each.
    use_up_free_month(&api).await;
    let ids = running_agents(&api, "echo-paid", AGENTS).await;
    assert_eq!(assert_books_balance(&server, &account).await, 9_000 * NC);

    // Three REST and two gRPC destroys of each agent, all fifty at once.
    let server = std::sync::Arc::new(server);
    let answers = race(&ids, |id, racer| {
        let (api, server, key) = (api.clone(), server.clone(), account.key.clone());
        async move {
            if racer < 3 {
                api.post(&format!("/api/instances/{id}/destroy"), json!({})).await
            } else {
                grpc_destroy(&server, &key, id).await
            }
        }
    })
    .await;
    let mut refunded = 0;
    for (id, replies) in ids.iter().zip(&answers) {
        assert_eq!(count(replies, 200), 1, "one destroy of {id} wins: {replies:?}");
        for reply in replies.iter().filter(|r| r.status != 200) {
            assert!(matches!(reply.status, 404 | 409), "a losing destroy is 404 or 409: {reply:?}");
        }
        refunded += replies.iter().find(|r| r.status == 200).unwrap().body["refunded_nanocents"].as_i64().unwrap();
        api.get(&format!("/api/instances/{id}")).await.err(404, "not_found");
        let activity = api.get(&format!("/api/instances/{id}/activity")).await.ok();
        let refunds = activity["charges"].as_array().unwrap().iter().filter(|c| c["kind"] == "refund").count();
        assert_eq!(refunds, 1, "one refund row for {id}: {activity}");
    }
    // Each refund is at most what was paid, and together they are what the books show.
    assert!((0..=1_000 * NC).contains(&refunded), "refunded {refunded}");
    assert_eq!(assert_books_balance(&server, &account).await, 9_000 * NC + refunded);

    // The store refuses a second refund of an instance by itself.
    let second = server
        .sql(&format!(
            "INSERT INTO ledger (id, account_id, instance_id, kind, amount_nanocents, balance_after_nanocents, description, \
             created_at) VALUES ('chg_again', '{}', '{}', 'refund', 100, 0, 'again', 0)",
            account.id, ids[0]
        ))
        .await;
    assert!(second.is_err(), "a second refund row must be refused by the store");
}

async fn racing_pauses_resumes_and_configs_move_no_money(backend: Backend) {
    let server = start(backend, |_| {}).await;
    let account = server.account(5_000).await;
    let api = server.api(Some(&account));
    let ids = running_agents(&api, "echo-paid", AGENTS).await;
    let before = assert_books_balance(&server, &account).await;

    let paused = race(&ids, |id, _| {
        let api = api.clone();
        async move { api.post(&format!("/api/instances/{id}/pause"), json!({})).await }
    })
    .await;
    for replies in &paused {
        assert_eq!(count(replies, 200), 1, "one pause wins: {replies:?}");
        replies.iter().filter(|r| r.status != 200).for_each(|r| r.err(409, "wrong_state"));
    }

    // Resumes race each other and every other agent's boot (one deploy settles at a time
    // per account): rounds until every agent is back.
    let mut waiting = ids.clone();
    for _ in 0..200 {
        if waiting.is_empty() {
            break;
        }
        let resumed = race(&waiting, |id, _| {
            let api = api.clone();
            async move { api.post(&format!("/api/instances/{id}/resume"), json!({})).await }
        })
        .await;
        let mut still = Vec::new();
        for (id, replies) in waiting.iter().zip(&resumed) {
            assert!(count(replies, 200) <= 1, "at most one resume of {id} wins: {replies:?}");
            for reply in replies.iter().filter(|r| r.status != 200) {
                assert_eq!(reply.status, 409, "{reply:?}");
            }
            if count(replies, 200) == 1 {
                assert_eq!(replies.iter().find(|r| r.status == 200).unwrap().body["charged_cents"], 0);
                api.wait_status(id, "running").await;
            } else {
                still.push(id.clone());
            }
        }
        waiting = still;
    }
    assert!(waiting.is_empty(), "every agent resumed: {waiting:?}");

    let configured = race(&ids, |id, racer| {
        let api = api.clone();
        async move {
            api.post(&format!("/api/instances/{id}/config"), json!({"agent_brief": format!("brief {racer}")})).await
        }
    })
    .await;
    for (id, replies) in ids.iter().zip(&configured) {
        assert!(count(replies, 200) >= 1, "a config of {id} goes through: {replies:?}");
        replies.iter().filter(|r| r.status != 200).for_each(|r| r.err(409, "wrong_state"));
        let running = api.wait_status(id, "running").await;
        assert!(running["brief"].as_str().unwrap().starts_with("brief "), "{running}");
    }
    assert_eq!(assert_books_balance(&server, &account).await, before, "pause, resume and config are free");
}

async fn racing_resumes_of_suspended_agents_pay_one_renewal_each(backend: Backend) {
    let server = start(backend, |config| config.hosting.billing.period = Duration::from_secs(2)).await;
    // The free month, then ten at 100: nothing is left for their renewals.
    let account = server.account(1_000).await;
    let api = server.api(Some(&account));
    use_up_free_month(&api).await;
    let ids = running_agents(&api, "echo-paid", AGENTS).await;
    for id in &ids {
        api.wait_status(id, "suspended").await;
    }
    assert_eq!(assert_books_balance(&server, &account).await, 0);
    server.store().await.add_credits(&account.id, 5_000).await.unwrap();

    let mut waiting = ids.clone();
    for _ in 0..200 {
        if waiting.is_empty() {
            break;
        }
        let resumed = race(&waiting, |id, _| {
            let api = api.clone();
            async move { api.post(&format!("/api/instances/{id}/resume"), json!({})).await }
        })
        .await;
        let mut still = Vec::new();
        for (id, replies) in waiting.iter().zip(&resumed) {
            assert!(count(replies, 200) <= 1, "at most one resume of {id} wins: {replies:?}");
            replies.iter().filter(|r| r.status != 200).for_each(|r| assert_eq!(r.status, 409, "{r:?}"));
            match replies.iter().find(|r| r.status == 200) {
                Some(won) => assert_eq!(won.body["charged_cents"], 100, "{won:?}"),
                None => still.push(id.clone()),
            }
        }
        waiting = still;
    }
    assert!(waiting.is_empty(), "every agent resumed: {waiting:?}");
    // Stop the clock of the books: destroy everything, then count.
    for id in &ids {
        api.post(&format!("/api/instances/{id}/destroy"), json!({})).await.ok();
    }
    assert_books_balance(&server, &account).await;
    for id in &ids {
        let paid_on_resume = server
            .sql(&format!(
                "SELECT COUNT(*) FROM ledger WHERE instance_id = '{id}' AND kind = 'renewal' \
                 AND description = 'renewal paid on resume'"
            ))
            .await
            .unwrap();
        assert_eq!(paid_on_resume, [1], "{id} paid its renewal once on resume");
    }
}

async fn renewals_racing_lifecycle_calls_charge_each_period_once(backend: Backend) {
    let server = start(backend, |config| config.hosting.billing.period = Duration::from_millis(700)).await;
    let account = server.account(20_000).await;
    let api = server.api(Some(&account));
    use_up_free_month(&api).await;
    let ids = running_agents(&api, "echo-paid", AGENTS).await;

    // While the renewal worker charges period after period, race pauses, resumes and
    // finally destroys of every agent against it.
    for call in ["pause", "resume", "pause", "resume"] {
        race(&ids, |id, _| {
            let api = api.clone();
            async move { api.post(&format!("/api/instances/{id}/{call}"), json!({})).await }
        })
        .await;
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    let destroyed = race(&ids, |id, _| {
        let api = api.clone();
        async move { api.post(&format!("/api/instances/{id}/destroy"), json!({})).await }
    })
    .await;
    for replies in &destroyed {
        assert_eq!(count(replies, 200), 1, "{replies:?}");
    }
    let renewals = server
        .sql(&format!("SELECT COUNT(*) FROM ledger WHERE account_id = '{}' AND kind = 'renewal'", account.id))
        .await
        .unwrap();
    assert!(renewals[0] > 0, "the worker renewed while the calls raced");
    assert!(assert_books_balance(&server, &account).await >= 0);
}

async fn racing_metered_turns_charge_each_turn_once(backend: Backend) {
    // echo's model priced at one cent per token: "[agent i] hi" is 3 tokens in all.
    let prices = "[default]\ninput_usd_per_mtok = 0\noutput_usd_per_mtok = 0\n\
                  [models.echo]\ninput_usd_per_mtok = 10000\noutput_usd_per_mtok = 10000\n";
    let server =
        start(backend, |config| config.hosting.prices = PriceBook::from_toml(prices).expect("price book")).await;
    let account = server.account(120).await;
    let api = server.api(Some(&account));
    let ids = running_agents(&api, "echo", AGENTS).await;

    // Rounds of five messages to each agent at once, until the credits run out.
    let mut charged = 0;
    let mut answered = 0;
    for _ in 0..10 {
        let round = race(&ids, |id, _| {
            let api = api.clone();
            async move { api.message(&id, "hi").await }
        })
        .await;
        for reply in round.iter().flatten() {
            match reply.status {
                200 => {
                    answered += 1;
                    charged += reply.body["charged_nanocents"].as_i64().unwrap();
                }
                _ => reply.err(402, "insufficient_credits"),
            }
        }
    }
    assert!(answered > 0 && charged > 0, "turns ran and were charged");
    let balance = assert_books_balance(&server, &account).await;
    assert_eq!(balance, 120 * NC - charged, "the balance moved by what the replies said");
    // Metering may go below zero by less than one round of turns in flight, never more.
    assert!(balance > -(5 * (AGENTS * RACERS) as i64) * NC, "balance {balance}");

    // Every answered turn is stored, with the charge its reply reported.
    let mut stored = 0;
    let mut stored_charges = 0;
    for id in &ids {
        let activity: Value = api.get(&format!("/api/instances/{id}/activity?limit=500")).await.ok();
        for turn in activity["turns"].as_array().unwrap().iter().filter(|t| t["status"] == "completed") {
            stored += 1;
            stored_charges += turn["charged_nanocents"].as_i64().unwrap();
        }
    }
    assert_eq!((stored, stored_charges), (answered, charged));
}

/// Issue 29's case: 40 cents, twenty managed assistant agents of one account, one 35-cent
/// turn each, all at once. Turns are admitted against the balance less the credits held
/// for the turns in flight, so the balance ends at most one turn below zero (it went to
/// −414 cents before). With credits for all of them, all twenty run at once.
async fn twenty_agents_messaged_at_once_overdraw_by_at_most_one_turn(backend: Backend) {
    // $1,000 per Mtok in and out: a token costs a tenth of a cent; 100 + 250 tokens = 35 cents.
    let (upstream, seen) = fake_upstream(Answer::usage(100, 250)).await;
    let prices = "[models.\"gpt-4o\"]\ninput_usd_per_mtok = 1000\noutput_usd_per_mtok = 1000\n";
    let server = start(backend, |config| {
        config.hosting.prices = PriceBook::from_toml(prices).expect("price book");
        config.hosting.models.openai = Some(roost_server::llm::Upstream { base_url: upstream, api_key: None });
    })
    .await;
    let account = server.account(0).await;
    let api = server.api(Some(&account));
    let ids = running_agents(&api, "assistant-free", 20).await;
    let store = server.store().await;
    let all_at_once = || {
        let handles: Vec<_> = ids
            .iter()
            .map(|id| {
                let (api, id) = (api.clone(), id.clone());
                tokio::spawn(async move { api.message(&id, "hi").await })
            })
            .collect();
        async move {
            let mut replies = Vec::new();
            for handle in handles {
                replies.push(handle.await.expect("turn"));
            }
            replies
        }
    };

    let mut served = 0;
    for round in 0..3 {
        store.add_credits(&account.id, 40).await.unwrap();
        let before = assert_books_balance(&server, &account).await;
        let replies = all_at_once().await;
        for reply in &replies {
            match reply.status {
                200 => assert_eq!(reply.body["charged_cents"], 35, "{:?}", reply.body),
                _ => reply.err(402, "insufficient_credits"),
            }
        }
        let answered = count(&replies, 200) as i64;
        served += answered;
        let balance = assert_books_balance(&server, &account).await;
        assert!(answered >= 1, "round {round}: the balance was {before}, above zero");
        assert_eq!(balance, before - 35 * NC * answered, "round {round}");
        assert!(balance >= -35 * NC, "round {round}: overdrawn by more than one turn: {balance}");
    }
    assert_eq!(seen.lock().unwrap().requests.len() as i64, served, "refused turns never reached the upstream");
    assert_holds_released(&server).await;

    // Credits for every turn: nothing waits on anything.
    store.add_credits(&account.id, 100_000).await.unwrap();
    let replies = all_at_once().await;
    assert_eq!(count(&replies, 200), 20, "{replies:?}");
    assert_books_balance(&server, &account).await;
}

/// Money is added with checked arithmetic: an amount, or a sum, past the balance ceiling is
/// 400 and changes nothing, instead of overflowing the store's integers (a 500 before).
async fn credits_past_the_balance_ceiling_are_refused(backend: Backend) {
    use roost_server::billing::money::MAX_BALANCE_CENTS;
    let server = start(backend, |_| {}).await;
    let account = server.account(0).await;
    let store = server.store().await;
    for cents in [i64::MAX, MAX_BALANCE_CENTS + 1] {
        let err = store.add_credits(&account.id, cents).await.unwrap_err().to_api();
        assert_eq!(err.reason(), roost_proto::ErrorReason::InvalidArgument, "{cents}");
    }
    store.add_credits(&account.id, MAX_BALANCE_CENTS).await.unwrap();
    let err = store.add_credits(&account.id, 1).await.unwrap_err().to_api();
    assert_eq!(err.reason(), roost_proto::ErrorReason::InvalidArgument);
    assert!(store.create_account("rich", i64::MAX).await.is_err());
    assert_eq!(assert_books_balance(&server, &account).await, MAX_BALANCE_CENTS * NC);
}

/// Issue 49: money is exact below a cent. A thousand turns at $0.00023 each, five agents
/// messaged at once, move the balance by exactly 23 cents; each turn and its ledger row say
/// $0.00023 exactly (its `*_cents` fields round to 0); the owner's pages show `$0.00023`.
async fn a_thousand_turns_below_a_cent_move_the_balance_exactly(backend: Backend) {
    // echo's model at $230 per million prompt tokens: a one-word message costs $0.00023.
    let prices = "[default]\ninput_usd_per_mtok = 0\noutput_usd_per_mtok = 0\n\
                  [models.echo]\ninput_usd_per_mtok = 230\noutput_usd_per_mtok = 0\n";
    let server = start(backend, |config| {
        config.hosting.prices = PriceBook::from_toml(prices).expect("price book");
        config.webapp.signup_open = true;
    })
    .await;
    let mut ada = crate::webapp::signed_up(&server, "ada@example.com").await;
    let account_id = crate::webapp::account_id(&mut ada).await;
    let store = server.store().await;
    store.add_credits(&account_id, 100).await.unwrap();
    let key = store.create_key(&account_id, "test").await.unwrap().secret;
    let account = TestAccount { id: account_id, key };
    let api = server.api(Some(&account));
    let ids = running_agents(&api, "echo", 5).await;
    let before = assert_books_balance(&server, &account).await;
    assert_eq!(before, 100 * NC);

    let sends = ids.iter().map(|id| {
        let (api, id) = (api.clone(), id.clone());
        async move {
            let mut charges = Vec::new();
            for _ in 0..200 {
                let turn = api.message(&id, "hi").await.ok();
                charges.push((turn["charged_nanocents"].as_i64(), turn["charged_cents"].as_i64()));
            }
            charges
        }
    });
    let charges: Vec<_> = futures::future::join_all(sends).await.into_iter().flatten().collect();
    assert_eq!(charges.len(), 1_000);
    assert!(charges.iter().all(|c| *c == (Some(23_000_000), Some(0))), "each turn costs $0.00023 exactly");
    let after = assert_books_balance(&server, &account).await;
    assert_eq!(before - after, 23 * NC, "a thousand turns at $0.00023 are exactly 23 cents");
    let shown = api.get("/api/account").await.ok();
    assert_eq!((shown["balance_cents"].as_i64(), shown["balance_nanocents"].as_i64()), (Some(77), Some(77 * NC)));
    let usage = server
        .sql(&format!(
            "SELECT COUNT(*) FROM ledger WHERE account_id = '{}' AND kind = 'usage' AND amount_nanocents = -23000000",
            account.id
        ))
        .await
        .unwrap();
    assert_eq!(usage, [1_000], "one exact usage row a turn");

    // The owner's pages: the agent's turns and the home page's ledger say $0.00023.
    let page = ada.get(&format!("/instances/{}", ids[0])).await;
    assert!(page.body.contains("$0.00023"), "the chat shows each turn's exact cost: {}", page.body);
    let home = ada.get("/").await;
    assert!(home.body.contains("-$0.00023"), "the ledger shows each charge exactly: {}", home.body);
    assert!(home.body.contains("$0.77"), "{}", home.body);
}

/// A store from before money was exact (migrations through 0036): whole cents, and a
/// fraction of a cent of metered usage carried on the account. After the upgrade the
/// balance is exact, the carry is charged on a ledger row of its own, and the ledger still
/// adds up to the balance; turns and holds keep their amounts.
async fn ledgers_kept_in_cents_migrate_exactly(backend: Backend) {
    let inserts = [
        "INSERT INTO accounts (id, name, balance_cents, usage_carry_nanocents, plan, created_at, updated_at) \
         VALUES ('acct_old', 'old', 1000, 750000000, 'free', 1, 1)"
            .to_owned(),
        "INSERT INTO ledger (id, account_id, instance_id, kind, amount_cents, balance_after_cents, description, created_at) \
         VALUES ('chg_a', 'acct_old', NULL, 'credit', 1200, 1200, 'credits added', 1), \
                ('chg_b', 'acct_old', 'ins_old', 'usage', -200, 1000, 'model use', 2)"
            .to_owned(),
        "INSERT INTO turns (id, instance_id, account_id, seq, status, source, text, reply, error, queued_at, started_at, \
         duration_ms, input_tokens, output_tokens, model, charged_cents) \
         VALUES ('turn_old', 'ins_old', 'acct_old', 1, 'completed', 'api', 'hi', 'hello', '', 1, 1, 1, 1, 1, 'm', 2)"
            .to_owned(),
        "INSERT INTO credit_holds (turn_id, account_id, instance_id, cents, created_at, expires_at) \
         VALUES ('turn_held', 'acct_old', 'ins_old', 3, 1, 9000000000000)"
            .to_owned(),
    ];
    let (url, _store) = roost_tests::sql::store_made_before(backend, 36, &inserts).await;
    let server = TestServer::start_with(backend, |config| config.database_url = url.clone()).await;
    let key = server.store().await.create_key("acct_old", "test").await.unwrap().secret;
    let account = TestAccount { id: "acct_old".into(), key };
    // 10 dollars less the 0.75 cents carried.
    assert_eq!(assert_books_balance(&server, &account).await, 1_000 * NC - 750_000_000);
    let carried = server
        .sql("SELECT amount_nanocents FROM ledger WHERE id = 'chg_carry_acct_old' AND kind = 'usage'")
        .await
        .unwrap();
    assert_eq!(carried, [-750_000_000], "the carry is charged on a row of its own");
    let moved = server.sql("SELECT amount_nanocents FROM ledger WHERE id IN ('chg_a', 'chg_b') ORDER BY id").await;
    assert_eq!(moved.unwrap(), [1_200 * NC, -200 * NC]);
    assert_eq!(server.sql("SELECT charged_nanocents FROM turns").await.unwrap(), [2 * NC]);
    assert_eq!(server.sql("SELECT nanocents FROM credit_holds").await.unwrap(), [3 * NC]);
    let shown = server.api(Some(&account)).get("/api/account").await.ok();
    assert_eq!(
        (shown["balance_cents"].as_i64(), shown["balance_nanocents"].as_i64()),
        (Some(999), Some(999_250_000_000))
    );
}
