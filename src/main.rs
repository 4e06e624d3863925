//! The `logship` server binary: `demo`, `master`, `slave` and `bench`. Wiring only: the
//! protocol lives in `logship-core`, the store in `logship-store`, the I/O in `logship-tokio`.
// A binary has no public API: `pub` inside it marks what modules share.
#![allow(unreachable_pub)]
#![forbid(unsafe_code)]

mod bench;
mod broker;
mod config;
mod coordination;
mod demo;
#[cfg(feature = "etcd")]
mod failover;
mod http;
mod metrics;
mod remoting;
mod restart_fence;
mod roles;
mod server;
mod status_cmd;
mod status_page;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

/// RocketMQ-compatible master/slave commit-log replication.
#[derive(Parser, Debug)]
#[command(name = "logship", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// A SYNC_MASTER and two slaves in one process: produce, watch the lag, check the logs.
    Demo(demo::DemoArgs),
    /// Run a master broker (ASYNC_MASTER unless brokerRole says SYNC_MASTER).
    Master(ServeArgs),
    /// Run a slave broker replicating from haMasterAddress.
    Slave(ServeArgs),
    /// Run a controller-mode broker (enableControllerMode=true, the AutoSwitch protocol): store
    /// and HTTP API up, no HA role until POST /ha/changeToMaster or /ha/changeToSlave gives one.
    Broker(ServeArgs),
    /// Measure replication against raw baselines in the same run.
    Bench(bench::BenchArgs),
    /// Show a broker's replication state, like `mqadmin haStatus`; the exit code is its health.
    Status(status_cmd::StatusArgs),
    /// Print the configuration reference's key tables (Markdown), as docs/configuration.md holds
    /// them, from the keys' declarations.
    ConfigKeys,
}

/// Options shared by `master` and `slave`. Flags override `--config`.
#[derive(Args, Debug)]
struct ServeArgs {
    /// A RocketMQ broker.conf (key=value properties).
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// Set any broker.conf key, e.g. --set haTransferBatchSize=65536 (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_key_value)]
    set: Vec<(String, String)>,
    /// storePathRootDir.
    #[arg(long)]
    store: Option<PathBuf>,
    /// listenPort (the remoting port RocketMQ clients connect to).
    #[arg(long)]
    listen_port: Option<u16>,
    /// httpListenPort (the HTTP API, metrics and status page; default listenPort + 2).
    #[arg(long)]
    http_port: Option<u16>,
    /// haListenPort (default listenPort + 1).
    #[arg(long)]
    ha_listen_port: Option<u16>,
    /// haMasterAddress, host:port (slaves).
    #[arg(long)]
    master: Option<String>,
    /// brokerRole: ASYNC_MASTER or SYNC_MASTER (masters).
    #[arg(long)]
    role: Option<String>,
    /// Check the configuration (file and flags) and exit: 0 if the broker would start with
    /// it, 2 with the error if not; warnings go to stderr. Nothing is bound or opened.
    #[arg(long)]
    check: bool,
    /// Print every key's effective value and where it came from (default, file:line, command
    /// line), like `mqbroker -p`, and exit without starting (2 if the configuration is bad).
    #[arg(long)]
    print_config: bool,
}

fn parse_key_value(s: &str) -> Result<(String, String), String> {
    let (k, v) = s.split_once('=').ok_or_else(|| format!("expected KEY=VALUE, found {s:?}"))?;
    if k.trim().is_empty() {
        return Err(format!("expected KEY=VALUE, found {s:?}"));
    }
    Ok((k.trim().to_string(), v.trim().to_string()))
}

impl ServeArgs {
    fn overrides(&self) -> Vec<(String, String)> {
        let mut out = self.set.clone();
        let mut add = |k: &str, v: Option<String>| {
            if let Some(v) = v {
                out.push((k.to_string(), v));
            }
        };
        add("storePathRootDir", self.store.as_ref().map(|p| p.display().to_string()));
        add("listenPort", self.listen_port.map(|p| p.to_string()));
        add("haListenPort", self.ha_listen_port.map(|p| p.to_string()));
        add("httpListenPort", self.http_port.map(|p| p.to_string()));
        add("haMasterAddress", self.master.clone());
        add("brokerRole", self.role.clone());
        out
    }
}

/// Which subcommand serves: `master`, `slave` or `broker` (controller mode).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Serve {
    Master,
    Slave,
    Controller,
}

fn settings_for(args: &ServeArgs, serve: Serve) -> anyhow::Result<config::BrokerSettings> {
    Ok(loaded_for(args, serve)?.settings)
}

fn loaded_for(args: &ServeArgs, serve: Serve) -> anyhow::Result<config::Loaded> {
    if serve == Serve::Master && args.master.is_some() {
        anyhow::bail!(
            "--master sets haMasterAddress, where a slave connects; `logship master` runs a master: drop \
             --master, or run `logship slave`"
        );
    }
    let defaults: &[(&str, &str)] = match serve {
        Serve::Master => &[],
        Serve::Slave => &[("brokerRole", "SLAVE")],
        Serve::Controller => &[("enableControllerMode", "true")],
    };
    let loaded = config::load(defaults, args.config.as_deref(), &args.overrides()).inspect_err(|e| {
        for warning in &e.warnings {
            tracing::warn!("{warning}");
        }
    })?;
    for warning in &loaded.warnings {
        tracing::warn!("{warning}");
    }
    let controller = loaded.settings.controller.is_some();
    if serve == Serve::Controller && !controller {
        anyhow::bail!(
            "enableControllerMode=false but `logship broker` runs controller mode: use `logship master` or `logship slave`"
        );
    }
    if serve == Serve::Controller {
        return Ok(loaded);
    }
    if controller {
        anyhow::bail!(
            "enableControllerMode=true: a controller-mode broker takes its role from the admin calls; \
             run `logship broker`"
        );
    }
    let slave = serve == Serve::Slave;
    let role = loaded.settings.broker_role;
    let is_slave = role == logship_core::BrokerRole::Slave;
    if slave && !is_slave {
        anyhow::bail!(
            "brokerRole={} but `logship slave` runs a SLAVE: use `logship master`",
            role.rocketmq_name()
        );
    }
    if !slave && is_slave {
        anyhow::bail!("brokerRole=SLAVE but `logship master` runs a master: use `logship slave`");
    }
    Ok(loaded)
}

/// Logs to stderr, filtered by `RUST_LOG` (else `default`); colour only when stderr is a
/// terminal and `NO_COLOR` is unset or empty.
fn init_logging(default: &str) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let ansi = std::io::stderr().is_terminal() && !no_color;
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi).init();
}

/// An error and its causes on one line, each cause once: a cause whose text its parent
/// already ends with (an error that shows its source and also returns it) is not repeated.
fn error_chain(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.ends_with(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

/// Raises RLIMIT_NOFILE's soft limit to its hard limit: a broker's descriptors are its
/// connections and files, and the soft default (often 1024) is an accident of the shell.
fn raise_open_file_limit() {
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => tracing::info!(limit, "RLIMIT_NOFILE raised to its hard limit"),
        Err(e) => tracing::warn!(%e, "cannot raise RLIMIT_NOFILE; keeping the current limit"),
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread().enable_all().build()?)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo(args) => {
            init_logging("warn");
            runtime().and_then(|rt| rt.block_on(demo::run(args)))
        }
        Command::Bench(args) => {
            init_logging("warn");
            runtime().and_then(|rt| rt.block_on(bench::run(args)))
        }
        Command::Status(args) => return status_cmd::main(&args),
        Command::ConfigKeys => {
            print!("{}", config::reference_tables());
            return ExitCode::SUCCESS;
        }
        Command::Master(args) => serve(&args, Serve::Master),
        Command::Slave(args) => serve(&args, Serve::Slave),
        Command::Broker(args) => serve(&args, Serve::Controller),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("logship: {}", error_chain(&e));
            ExitCode::from(2)
        }
    }
}

fn serve(args: &ServeArgs, kind: Serve) -> anyhow::Result<bool> {
    init_logging("info");
    if args.check || args.print_config {
        let loaded = loaded_for(args, kind)?;
        if args.print_config {
            print!("{}", config::print_effective(&loaded.effective));
        }
        if args.check {
            let origin = args.config.as_ref().map_or("the command line".into(), |p| p.display().to_string());
            println!("{origin}: configuration OK, {} warning(s)", loaded.warnings.len());
        }
        return Ok(true);
    }
    let settings = settings_for(args, kind)?;
    raise_open_file_limit();
    runtime()?.block_on(server::run(settings))?;
    Ok(true)
}
