//! Configuration: defaults in code < the user's `$XDG_CONFIG_HOME/trawl/trawl.toml` (else
//! `~/.config/trawl/trawl.toml`) < `./trawl.toml` (or the file `--config` names, which
//! replaces both files) < `TRAWL_*` environment variables < flags, loaded once and checked
//! into typed values before anything starts. Nested keys in the environment use a double
//! underscore: `TRAWL_HTTP__MAX_BYTES=2000000`.
//!
//! Not here: the meaning of each key; each lives with the code it configures
//! (`web::Config`, `web::Policy`, `fetch::Config`, `runner::Config`) and is composed here.

use std::path::{Path, PathBuf};

use figment::Figment;
use figment::providers::{Env, Format as _, Serialized, Toml};
use serde::{Deserialize, Serialize};
use trawl_workers::{fetch, web};

pub use crate::secret::Secret;
use crate::{api, archive, runner, webhooks};

/// The file read when `--config` is not given (ignored when absent).
pub const DEFAULT_CONFIG_FILE: &str = "trawl.toml";

/// Every setting of trawl.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Where the store and queue files live.
    pub data_dir: PathBuf,
    /// The store's database: `postgres://…` for the distributed store shared by many
    /// processes, or `sqlite://PATH`; unset, the SQLite file in `data_dir`. The `DATABASE_URL`
    /// environment variable sets it too. Shown redacted, since it may hold a password.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub database_url: Option<Secret>,
    /// The distributed queue: `redis://…` (or `rediss://…`), shared by every worker process;
    /// unset, the SQLite queue file in `data_dir`. The `REDIS_URL` environment variable sets
    /// it too. Redis must run with `maxmemory-policy noeviction` (checked at connect). Shown
    /// redacted, since it may hold a password.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redis_url: Option<Secret>,
    /// Prefix of queue names, so several trawls can share one backend.
    pub namespace: String,
    /// Outgoing requests: identity and limits.
    pub http: web::Config,
    /// Which destinations may be fetched.
    pub ssrf: web::Policy,
    /// Outbound proxies for plain HTTP fetches.
    pub proxy: web::proxy::Config,
    /// Fetch options and their bounds.
    pub fetch: fetch::Config,
    /// Worker pools and retries.
    pub runner: runner::Config,
    /// The HTTP API.
    pub api: api::Config,
    /// Webhook signing and delivery.
    pub webhooks: webhooks::Config,
    /// The archive pool: chunking, index commits, WARC files.
    pub archive: archive::Config,
    /// Per-host politeness of crawls.
    pub politeness: trawl_workers::crawl::politeness::Config,
    /// The browser pool: Chromium, contexts, recycling, action limits.
    pub browse: trawl_workers::browse::Config,
    /// Agent sessions over the API.
    pub sessions: crate::sessions::Config,
    /// Web search providers (SearxNG, DuckDuckGo), their paces and the answers' cache.
    pub search: trawl_workers::search::Config,
    /// Seconds a stopping process (`serve`, `work`, `run`, `crawl`) waits for each part —
    /// running jobs, the archive pool's commit, open connections — before leaving what is
    /// left to the queue's recovery.
    pub shutdown_timeout_secs: u64,
    /// Seconds to wait for PostgreSQL (`database_url`) and Redis (`redis_url`) to accept a
    /// first connection at start; a server down or silent fails the command after this.
    pub connect_timeout_secs: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            data_dir: PathBuf::from(".trawl"),
            database_url: None,
            redis_url: None,
            namespace: "trawl".to_owned(),
            http: web::Config::default(),
            ssrf: web::Policy::default(),
            proxy: web::proxy::Config::default(),
            fetch: fetch::Config::default(),
            runner: runner::Config::default(),
            api: api::Config::default(),
            webhooks: webhooks::Config::default(),
            archive: archive::Config::default(),
            politeness: trawl_workers::crawl::politeness::Config::default(),
            browse: trawl_workers::browse::Config::default(),
            sessions: crate::sessions::Config::default(),
            search: trawl_workers::search::Config::default(),
            shutdown_timeout_secs: 30,
            connect_timeout_secs: 5,
        }
    }
}

/// A configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file or environment could not be read into the tree.
    #[error("configuration: {0}")]
    Load(#[from] Box<figment::Error>),
    /// A named config file does not exist.
    #[error("configuration file {0} not found")]
    Missing(PathBuf),
    /// A value is out of its bounds: the namespace, or a section whose check reports text
    /// (`http`, `proxy`, `browse`).
    #[error("configuration: {0}")]
    Invalid(String),
    /// A `[fetch]` value is out of its bounds.
    #[error("configuration: {0}")]
    Fetch(fetch::ConfigError),
    /// A `[runner]` value is out of its bounds.
    #[error("configuration: {0}")]
    Runner(runner::ConfigError),
    /// An `[api]` value is out of its bounds.
    #[error("configuration: {0}")]
    Api(api::ConfigError),
    /// A `[webhooks]` value is out of its bounds.
    #[error("configuration: {0}")]
    Webhooks(webhooks::ConfigError),
    /// An `[archive]` value is out of its bounds.
    #[error("configuration: {0}")]
    Archive(archive::ConfigError),
    /// A `[politeness]` value is out of its bounds.
    #[error("configuration: {0}")]
    Politeness(trawl_workers::crawl::politeness::ConfigError),
    /// A `[sessions]` value is out of its bounds.
    #[error("configuration: {0}")]
    Sessions(crate::sessions::ConfigError),
    /// An `[ssrf]` value is out of its bounds.
    #[error("configuration: ssrf: {0}")]
    Ssrf(web::ssrf::PolicyError),
}

/// An environment variable's value, for the `env:NAME` references of secrets.
// Secrets' references are read here, with the rest of the configuration.
#[allow(clippy::disallowed_methods)]
fn environment_variable(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The user's configuration file: `$XDG_CONFIG_HOME/trawl/trawl.toml`, else
/// `$HOME/.config/trawl/trawl.toml` (whether or not it exists).
// Where the configuration comes from is read here, with the rest of it.
#[allow(clippy::disallowed_methods)]
pub fn user_config_file() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|home| !home.is_empty())
                .map(|home| PathBuf::from(home).join(".config"))
        })?;
    Some(base.join("trawl").join(DEFAULT_CONFIG_FILE))
}

/// Refuses a section or nested table given as an array (`api = []`, `TRAWL_HTTP=[1]`): serde's
/// derive reads an array as the table's fields in order, so `[]` was every default, silently,
/// and `[1, 2]` the first two fields by position. Only arrays are checked, where the defaults
/// have a table: a table's other faults are the extractor's to tell.
fn tables_stay_tables(figment: &Figment) -> Result<(), Error> {
    fn walk(
        defaults: &figment::value::Dict,
        given: &figment::value::Dict,
        path: &str,
        figment: &Figment,
    ) -> Result<(), Error> {
        for (key, default) in defaults {
            let (Some(default), Some(value)) = (default.as_dict(), given.get(key)) else {
                continue;
            };
            let key = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            };
            match value {
                figment::value::Value::Dict(_, value) => walk(default, value, &key, figment)?,
                figment::value::Value::Array(tag, _) => {
                    let source = figment
                        .get_metadata(*tag)
                        .and_then(|metadata| metadata.source.as_ref())
                        .map(|source| format!(" (in {source})"))
                        .unwrap_or_default();
                    return Err(Error::Invalid(format!(
                        "`{key}` must be a table, not an array{source}"
                    )));
                }
                _ => {}
            }
        }
        Ok(())
    }
    let defaults = figment::value::Value::serialize(Config::default()).map_err(Box::new)?;
    let given = figment.find_value("").map_err(Box::new)?;
    match (defaults.as_dict(), given.as_dict()) {
        (Some(defaults), Some(given)) => walk(defaults, given, "", figment),
        _ => Ok(()),
    }
}

impl Config {
    /// Loads defaults, then `file`, or else the user's file ([`user_config_file`]) and
    /// `./trawl.toml` (each when present), then the environment.
    pub fn load(file: Option<&Path>) -> Result<Config, Error> {
        let mut figment = Figment::from(Serialized::defaults(Config::default()));
        match file {
            Some(path) if !path.exists() => return Err(Error::Missing(path.to_owned())),
            Some(path) => figment = figment.merge(Toml::file_exact(path)),
            None => {
                if let Some(user) = user_config_file().filter(|path| path.exists()) {
                    figment = figment.merge(Toml::file_exact(user));
                }
                if Path::new(DEFAULT_CONFIG_FILE).exists() {
                    figment = figment.merge(Toml::file_exact(DEFAULT_CONFIG_FILE));
                }
            }
        }
        // DATABASE_URL and REDIS_URL, the names other tools use, below TRAWL_DATABASE_URL and
        // TRAWL_REDIS_URL.
        figment = figment.merge(Env::raw().only(&["database_url", "redis_url"]));
        // TRAWL_LOG, TRAWL_CONFIG and TRAWL_TOKEN are read by main and the CLI, not the tree.
        figment = figment.merge(
            Env::prefixed("TRAWL_")
                .ignore(&["log", "config", "token"])
                .split("__"),
        );
        tables_stay_tables(&figment)?;
        let mut config: Config = figment.extract().map_err(Box::new)?;
        // Secrets given as `env:NAME` (the fallback providers' keys) are read now, once.
        config
            .fetch
            .resolve_keys(&environment_variable)
            .map_err(Error::Fetch)?;
        // So is the proxy environment, when trusted (checked by `validate`).
        if config.proxy.trust_env {
            config.proxy.environment = web::proxy::Environment::read(environment_variable);
        }
        Ok(config)
    }

    /// Checks every section; call after flags are applied.
    pub fn validate(&self) -> Result<(), Error> {
        // `http`, `proxy` and `browse` report their faults as text.
        self.http.validate().map_err(Error::Invalid)?;
        self.fetch.validate().map_err(Error::Fetch)?;
        self.proxy.validate().map_err(Error::Invalid)?;
        self.runner.validate().map_err(Error::Runner)?;
        self.api.validate().map_err(Error::Api)?;
        self.webhooks.validate().map_err(Error::Webhooks)?;
        self.archive.validate().map_err(Error::Archive)?;
        self.politeness.validate().map_err(Error::Politeness)?;
        self.browse.validate().map_err(Error::Invalid)?;
        self.sessions.validate().map_err(Error::Sessions)?;
        self.ssrf.validate().map_err(Error::Ssrf)?;
        self.search.validate().map_err(Error::Invalid)?;
        if self.connect_timeout_secs == 0 || self.connect_timeout_secs > 300 {
            return Err(Error::Invalid(format!(
                "connect_timeout_secs = {} must be between 1 and 300",
                self.connect_timeout_secs
            )));
        }
        if self.namespace.is_empty()
            || !self
                .namespace
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err(Error::Invalid(format!(
                "namespace {:?} must be non-empty ASCII letters, digits, '-', '_' or '.'",
                self.namespace
            )));
        }
        Ok(())
    }

    /// The keys that may be unset, each with whether it is set: TOML has no way to write an
    /// unset value, so `trawl config` prints the unset ones as comments.
    pub fn optional_keys(&self) -> [(&'static str, bool); 14] {
        [
            ("database_url", self.database_url.is_some()),
            ("redis_url", self.redis_url.is_some()),
            ("api.admin_token", self.api.admin_token.is_some()),
            ("webhooks.secret", self.webhooks.secret.is_some()),
            ("browse.executable", self.browse.executable.is_some()),
            ("browse.profile_root", self.browse.profile_root.is_some()),
            ("sessions.listen", self.sessions.listen.is_some()),
            ("sessions.advertise", self.sessions.advertise.is_some()),
            (
                "sessions.worker_token",
                self.sessions.worker_token.is_some(),
            ),
            ("search.searxng.url", self.search.searxng.url.is_some()),
            ("fetch.firecrawl.url", self.fetch.firecrawl.url.is_some()),
            ("fetch.firecrawl.key", self.fetch.firecrawl.key.is_some()),
            ("fetch.crawl4ai.url", self.fetch.crawl4ai.url.is_some()),
            ("fetch.crawl4ai.key", self.fetch.crawl4ai.key.is_some()),
        ]
    }

    /// The store's SQLite file.
    pub fn store_path(&self) -> PathBuf {
        self.data_dir.join("trawl.sqlite")
    }

    /// How long a stopping process waits for each part.
    pub fn shutdown_grace(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.shutdown_timeout_secs)
    }

    /// How long to wait for PostgreSQL and Redis at start.
    pub fn connect_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.connect_timeout_secs)
    }

    /// The queue's SQLite file.
    pub fn queue_path(&self) -> PathBuf {
        self.data_dir.join("queue.sqlite")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_match_the_design() {
        let config = Config::default();
        config.validate().expect("defaults are valid");
        assert_eq!(config.http.max_bytes, 750_000);
        assert_eq!(config.http.max_redirects, 3);
        assert_eq!(config.http.timeout_secs, 30);
        assert_eq!(config.fetch.max_chars, 20_000);
        assert_eq!(config.fetch.cache_ttl_secs, 900);
        assert!(!config.ssrf.allow_private_network);
    }

    #[test]
    fn files_are_layered_and_unknown_keys_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("t.toml");
        std::fs::write(&path, "[http]\nmax_bytes = 2000\n[fetch]\nmax_chars = 10\n")
            .expect("write");
        let config = Config::load(Some(&path)).expect("loads");
        assert_eq!(config.http.max_bytes, 2_000);
        assert_eq!(config.fetch.max_chars, 10);
        assert_eq!(config.http.max_redirects, 3);

        std::fs::write(&path, "[http]\nmax_bytez = 2000\n").expect("write");
        let error = Config::load(Some(&path)).expect_err("unknown key");
        assert!(error.to_string().contains("max_bytez"), "{error}");

        // A section given as an array was read as its defaults (serde's derive takes a
        // struct's fields in order from an array); it is refused, with its key and file.
        for (text, key) in [
            ("api = []\n", "`api`"),
            ("http = [1, 2]\n", "`http`"),
            ("[search]\nsearxng = []\n", "`search.searxng`"),
        ] {
            std::fs::write(&path, text).expect("write");
            match Config::load(Some(&path)) {
                Err(Error::Invalid(message)) => {
                    assert!(
                        message.contains(&format!("{key} must be a table, not an array")),
                        "{text}: {message}"
                    );
                    assert!(message.contains("t.toml"), "{text}: {message}");
                }
                other => panic!("{text}: {other:?}"),
            }
        }
        std::fs::write(&path, "[http]\nmax_bytes = 2000\n").expect("write");
        assert!(Config::load(Some(&path)).is_ok());

        let missing = dir.path().join("nope.toml");
        assert!(matches!(
            Config::load(Some(&missing)),
            Err(Error::Missing(_))
        ));
    }

    #[test]
    fn tokens_are_bare_strings_or_tables_with_a_tenant() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("t.toml");
        std::fs::write(
            &path,
            "[api]\nadmin_token = \"admin-token-0123456789\"\ntokens = [\"first-bare-0123456789\", \
             { token = \"acme-one-0123456789\", tenant = \"acme\" }, \
             { token = \"acme-two-0123456789\", tenant = \"acme\" }, \"second-bare-0123456789\"]\n",
        )
        .expect("write");
        let config = Config::load(Some(&path)).expect("loads");
        config.validate().expect("valid");
        let scopes: Vec<(String, Option<String>)> = config
            .api
            .token_scopes()
            .into_iter()
            .map(|(token, scope)| {
                let tenant = scope.filter().map(str::to_owned);
                (token.expose().to_owned(), tenant)
            })
            .collect();
        let fingerprint = crate::sessions::owner_of(Some("second-bare-0123456789"));
        assert_eq!(
            scopes,
            [
                ("first-bare-0123456789".into(), Some("default".into())),
                ("acme-one-0123456789".into(), Some("acme".into())),
                ("acme-two-0123456789".into(), Some("acme".into())),
                (
                    "second-bare-0123456789".into(),
                    Some(format!("token-{fingerprint}"))
                ),
                ("admin-token-0123456789".into(), None),
            ]
        );

        std::fs::write(
            &path,
            "[api]\ntokens = [{ token = \"acme-one-0123456789\", tenant = \"a c m e\" }]\n",
        )
        .expect("write");
        let error = Config::load(Some(&path))
            .expect("loads")
            .validate()
            .expect_err("a bad tenant name");
        assert!(error.to_string().contains("a c m e"), "{error}");
        std::fs::write(
            &path,
            "[api]\ntokens = [\"same-token-0123456789\"]\nadmin_token = \"same-token-0123456789\"\n",
        )
        .expect("write");
        assert!(
            Config::load(Some(&path))
                .expect("loads")
                .validate()
                .is_err()
        );
    }

    #[test]
    fn out_of_range_values_are_refused() {
        let mut config = Config::default();
        config.http.max_bytes = 1;
        assert!(config.validate().is_err());
        let config = Config {
            namespace: "has space".into(),
            ..Config::default()
        };
        assert!(config.validate().is_err());
    }
}
