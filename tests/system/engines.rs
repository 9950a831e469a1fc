//! The store engines a test runs against: SQLite in a temporary directory, and PostgreSQL in
//! a fresh database of the machine's server, dropped when the test ends (also when it fails).
//!
//! PostgreSQL is reached through its unix socket (`/var/run/postgresql`), since the tests run
//! in a network namespace where only loopback exists and the host's TCP port is not
//! reachable. `PG_TEST_URL` overrides the admin URL (a database the tests may create other
//! databases from). A PostgreSQL test that cannot reach the server fails; it never skips.

use trawl::store::Store;

/// The admin URL used when `PG_TEST_URL` is not set.
const DEFAULT_PG_ADMIN_URL: &str =
    "postgres://postgres@localhost/postgres?host=/var/run/postgresql";

/// Runs each named `async fn(TestDb)` twice: `NAME::sqlite` and `NAME::postgres`.
macro_rules! on_both_engines {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn sqlite() {
                    super::$name(crate::engines::TestDb::sqlite()).await;
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn postgres() {
                    super::$name(crate::engines::TestDb::postgres().await).await;
                }
            }
        )*
    };
}
pub(crate) use on_both_engines;

/// One test's database; removed on drop.
pub(crate) struct TestDb {
    /// The store URL (`sqlite://…` or `postgres://…`).
    pub(crate) url: String,
    _dir: Option<tempfile::TempDir>,
    _database: Option<DropDatabase>,
}

impl TestDb {
    /// A SQLite file in a new temporary directory.
    pub(crate) fn sqlite() -> TestDb {
        let dir = tempfile::tempdir().expect("tempdir");
        TestDb {
            url: format!("sqlite://{}", dir.path().join("store.sqlite").display()),
            _dir: Some(dir),
            _database: None,
        }
    }

    /// A new, empty PostgreSQL database `trawl_test_<ulid>`.
    pub(crate) async fn postgres() -> TestDb {
        let admin_url = admin_url();
        let name = format!("trawl_test_{}", ulid::Ulid::generate()).to_lowercase();
        let mut admin = connect_admin(&admin_url).await;
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
            .execute(&mut admin)
            .await
            .unwrap_or_else(|error| panic!("creating test database {name}: {error}"));
        let mut url = url::Url::parse(&admin_url).expect("PG_TEST_URL is a URL");
        url.set_path(&format!("/{name}"));
        TestDb {
            url: url.to_string(),
            _dir: None,
            _database: Some(DropDatabase { admin_url, name }),
        }
    }

    /// Opens a store on this database (each call is a new pool, like another process).
    pub(crate) async fn open(&self) -> Store {
        Store::connect(&self.url).await.expect("store opens")
    }
}

#[allow(clippy::disallowed_methods)] // Test set-up, not configuration.
fn admin_url() -> String {
    std::env::var("PG_TEST_URL").unwrap_or_else(|_| DEFAULT_PG_ADMIN_URL.to_owned())
}

async fn connect_admin(admin_url: &str) -> sqlx::PgConnection {
    use sqlx::Connection as _;
    sqlx::PgConnection::connect(admin_url).await.unwrap_or_else(|error| {
        panic!(
            "PostgreSQL is not reachable at {admin_url} ({error}). These tests need it: start it \
             with `pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start`, \
             or point PG_TEST_URL at a server whose user may create databases"
        )
    })
}

/// Drops a test database, from its own thread and runtime (a `Drop` cannot await, and the
/// test's runtime may be unwinding).
struct DropDatabase {
    admin_url: String,
    name: String,
}

impl Drop for DropDatabase {
    fn drop(&mut self) {
        let admin_url = self.admin_url.clone();
        let name = self.name.clone();
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async {
                let mut admin = connect_admin(&admin_url).await;
                // FORCE: the test's pools may still hold connections.
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"
                )))
                .execute(&mut admin)
                .await
                .map(|_| ())
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) && !std::thread::panicking() {
            panic!("dropping test database {}: {dropped:?}", self.name);
        }
    }
}
