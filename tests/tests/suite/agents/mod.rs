//! The hosted agent API end to end: the seed's flow, its errors, concurrency, the process
//! driver, billing and the assistant runtime, and what an agent's own telemetry may claim.

mod attacks;
mod billing;
mod concurrency;
mod errors;
pub(crate) mod experiments;
mod files;
mod flow;
mod gateway;
mod money;
mod packaged;
mod process;
mod ratings;
mod recording;
mod restart;
pub(crate) mod sandbox;
mod secrets;
pub(crate) mod streaming;
mod telemetry;

use std::time::Duration;

use roost_server::{ServeConfig, runtimes::Catalogue};
use roost_tests::{Backend, TestServer};

/// The runtimes tests use: the built-in ones plus a paid echo, a slow-booting process
/// runtime (for settling deploys), one whose command does not exist, and a free assistant
/// (for many metered agents on one account).
pub const TEST_CATALOGUE: &str = r#"
[[runtime]]
id = "echo"
driver = "echo"
price_cents_month = 0
included_model = true
default_model = "echo"

[[runtime]]
id = "echo-paid"
driver = "echo"
price_cents_month = 100
included_model = true
default_model = "echo"

[[runtime]]
id = "example"
driver = "process"
price_cents_month = 500
channels = ["telegram"]
included_model = true
default_model = "example"
command = ["python3", "{runtimes_dir}/example_agent.py"]
disk_mb = 64

[[runtime]]
id = "slow"
driver = "process"
price_cents_month = 0
included_model = true
default_model = "example"
command = ["python3", "{runtimes_dir}/example_agent.py"]
env = { EXAMPLE_BOOT_DELAY_MS = "1500" }
disk_mb = 64

[[runtime]]
id = "broken"
driver = "process"
price_cents_month = 0
command = ["/nonexistent/runtime-binary"]

[[runtime]]
id = "assistant"
driver = "assistant"
price_cents_month = 2000
channels = ["telegram"]
included_model = true
default_model = "gpt-4o"

[[runtime]]
id = "assistant-free"
driver = "assistant"
price_cents_month = 0
included_model = true
default_model = "gpt-4o"
"#;

/// Starts roost with [`TEST_CATALOGUE`], then `configure`.
pub async fn start(backend: Backend, configure: impl FnOnce(&mut ServeConfig)) -> TestServer {
    TestServer::start_with(backend, |config| {
        config.hosting.catalogue = Catalogue::from_toml(TEST_CATALOGUE).expect("test catalogue");
        config.hosting.boot_timeout = Duration::from_secs(20);
        configure(config);
    })
    .await
}
