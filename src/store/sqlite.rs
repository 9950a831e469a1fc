//! The embedded store engine: one SQLite file (WAL, `synchronous=NORMAL`), migrations from
//! `migrations/sqlite`. A separate file from the queue's, because apalis and trawl would
//! otherwise share one `_sqlx_migrations` table.
//!
//! SQLite has one writer at a time: every write transaction takes the write lock when it
//! begins, so what it reads stays as read until it commits, and jobs are numbered
//! (`done_seq`) in the statement that ends them, in commit order.
//!
//! Not here: the queries both engines share (`jobs`, `pages`, `crawls`, `sessions`), and
//! the interface (`Store`).

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Row, Sqlite, SqlitePool};

use super::Error;
use super::dialect::{Dialect, Tx};
use super::pages::{END_PAGES, END_PAGES_WHERE};
use super::rows::now_rfc3339;
use super::writer::PendingPage;

/// Values bound by one statement at most where their number grows with the input (well
/// within SQLite's limit on bound values).
const BINDS_PER_STATEMENT: usize = 400;

/// The SQLite engine, cheap to clone (connection pools).
#[derive(Debug, Clone)]
pub(super) struct SqliteStore {
    pub(super) pool: SqlitePool,
    /// The one connection of the store's batching tasks (`store::writer`: group commits,
    /// attempt starts, page cache lookups), most of a crawl's statements. A connection drops
    /// its page cache whenever another one has written, and a pool hands its idle
    /// connections out in turn: through the shared pool, nearly every batch began by reading
    /// again, one system call a page, the index and table pages it had read the batch
    /// before. On its own connection a batch finds them cached unless another part (a
    /// crawl's follow-ups, the archive pool) wrote in between.
    batches: SqlitePool,
}

impl SqliteStore {
    /// Opens (creating if needed) the store at `path` and runs the migrations.
    pub(super) async fn open(path: &Path) -> Result<SqliteStore, Error> {
        SqliteStore::connect(&format!("sqlite://{}", path.display())).await
    }

    /// Opens (creating if needed) the store at a `sqlite://` URL and runs the migrations.
    pub(super) async fn connect(url: &str) -> Result<SqliteStore, Error> {
        let options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(30));
        // sqlx takes no lock for SQLite migrations: two processes opening a new store at once
        // (`trawl serve --no-pools` and `trawl work` started together) would both create the
        // tables, and switching a new file to WAL fails while another connection holds it. A
        // file lock beside the database lets one connect and migrate while the others wait.
        let lock = lock_sqlite_migrations(options.get_filename())
            .await
            .map_err(Error::Lock)?;
        let pool = SqlitePoolOptions::new()
            // Few connections: writes are serialised anyway, and each connection's page cache
            // is dropped whenever another one writes.
            .max_connections(4)
            .connect_with(options.clone())
            .await?;
        sqlx::migrate!("./migrations/sqlite").run(&pool).await?;
        // Closing the file releases the lock.
        drop(lock);
        // Opened when the first batch comes: a process that stores no page never opens it.
        // (Each connection to `:memory:` is a database of its own: there, the shared pool.)
        let batches = if options.get_filename().as_os_str() == ":memory:" {
            pool.clone()
        } else {
            SqlitePoolOptions::new()
                .max_connections(1)
                .connect_lazy_with(options)
        };
        Ok(SqliteStore { pool, batches })
    }

    /// This engine with the batching tasks' connection as its pool: what `store::writer`
    /// runs its statements on.
    pub(super) fn for_batches(&self) -> SqliteStore {
        SqliteStore {
            pool: self.batches.clone(),
            batches: self.batches.clone(),
        }
    }

    /// Closes the batching tasks' connection (the shared pool closes with `close`).
    pub(super) async fn close_batches(&self) {
        self.batches.close().await;
    }

    pub(super) async fn mark_archived(
        &self,
        page_ids: &[String],
        state: &str,
    ) -> Result<(), Error> {
        if page_ids.is_empty() {
            return Ok(());
        }
        let now = now_rfc3339();
        // One statement for up to BINDS_PER_STATEMENT pages (an archive commit marks up to
        // a thousand): each statement is a round trip to the connection's thread.
        let mut tx = self.write_transaction().await?;
        for batch in page_ids.chunks(BINDS_PER_STATEMENT) {
            let mut update = sqlx::QueryBuilder::<Sqlite>::new("UPDATE pages SET archive_state = ");
            update.push_bind(state);
            update.push(", archived_at = ");
            update.push_bind(&now);
            update.push(" WHERE id");
            let ids: Vec<&str> = batch.iter().map(String::as_str).collect();
            Self::push_in(&mut update, &ids);
            update.build().execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    pub(super) async fn queued_jobs(&self, ids: &[String]) -> Result<Vec<String>, Error> {
        let mut queued = Vec::new();
        for batch in ids.chunks(BINDS_PER_STATEMENT) {
            let mut select = sqlx::QueryBuilder::<Sqlite>::new(
                // `+status`: see `Dialect::STATUS_BESIDE_IDS`.
                "SELECT id FROM jobs WHERE +status = 'queued' AND id",
            );
            let ids: Vec<&str> = batch.iter().map(String::as_str).collect();
            Self::push_in(&mut select, &ids);
            for row in select.build().fetch_all(&self.pool).await? {
                queued.push(row.try_get::<String, _>(0)?);
            }
        }
        Ok(queued)
    }

    pub(super) async fn cancel_crawl(&self, crawl_id: &str) -> Result<bool, Error> {
        let mut tx = self.write_transaction().await?;
        let changed = sqlx::query(
            "UPDATE crawls SET status = 'cancelled', finished_at = ?
             WHERE id = ? AND status = 'running'",
        )
        .bind(now_rfc3339())
        .bind(crawl_id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if changed > 0 {
            sqlx::query(
                "UPDATE jobs SET cancel_requested = 1
                 WHERE crawl_id = ? AND status IN ('queued', 'running')",
            )
            .bind(crawl_id)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(changed > 0)
    }
}

impl Dialect for SqliteStore {
    type Db = Sqlite;

    const FOR_UPDATE: &'static str = "";

    const BYTE_ORDER: &'static str = "";

    const STATUS_BESIDE_IDS: &'static str = "+status";

    const DONE_SEQ: &'static str = ", done_seq = (SELECT COALESCE(MAX(done_seq), 0) + 1 FROM jobs)";

    /// A transaction that takes the write lock at once. A deferred transaction that reads
    /// first and writes later fails with SQLITE_BUSY, without waiting, when another writer
    /// committed in between; an immediate one waits for the lock (busy_timeout).
    async fn write_transaction(&self) -> Result<Tx<Self>, Error> {
        Ok(self.pool.begin_with("BEGIN IMMEDIATE").await?)
    }

    fn push_in(builder: &mut sqlx::QueryBuilder<Sqlite>, ids: &[&str]) {
        builder.push(" IN (");
        let mut separated = builder.separated(", ");
        for id in ids {
            separated.push_bind(*id);
        }
        builder.push(")");
    }

    fn starts_with(column: &str, prefix: &str) -> String {
        format!("substr({column}, 1, length({prefix})) = {prefix}")
    }

    async fn number_ended(_tx: &mut Tx<Self>, _ids: &[&str]) -> Result<(), Error> {
        Ok(())
    }

    fn end_pages(pages: &[PendingPage]) -> sqlx::QueryBuilder<Sqlite> {
        let mut end_jobs = sqlx::QueryBuilder::new("WITH v(id, result, seq, attempt) AS (");
        end_jobs.push_values(pages.iter().enumerate(), |mut row, (seq, page)| {
            row.push_bind(page.job_id.as_str())
                .push_bind(page.result.as_str())
                .push_bind(seq as i64 + 1)
                .push_bind(page.attempt);
        });
        end_jobs.push(") ");
        end_jobs.push(END_PAGES);
        end_jobs.push_bind(now_rfc3339());
        end_jobs.push(", done_seq = (SELECT COALESCE(MAX(done_seq), 0) FROM jobs) + v.seq FROM v");
        end_jobs.push(END_PAGES_WHERE);
        end_jobs
    }

    const CRAWL_KEYS_PER_INSERT: usize = BINDS_PER_STATEMENT;

    fn add_crawl_keys(crawl_id: &str, keys: &[&str]) -> sqlx::QueryBuilder<Sqlite> {
        let mut insert = sqlx::QueryBuilder::new("INSERT INTO crawl_urls (crawl_id, url_key) ");
        insert.push_values(keys, |mut row, key| {
            row.push_bind(crawl_id).push_bind(*key);
        });
        insert.push(" ON CONFLICT DO NOTHING RETURNING url_key");
        insert
    }
}

/// Takes an exclusive lock on a file beside the SQLite database `db_file` (held until the
/// returned file is dropped), so that one process runs the migrations of a new database while
/// another opening it at the same moment waits: sqlx and apalis take no lock of their own on
/// SQLite. `None` for an in-memory database.
pub(crate) async fn lock_sqlite_migrations(
    db_file: &Path,
) -> std::io::Result<Option<std::fs::File>> {
    if db_file.as_os_str() == ":memory:" {
        return Ok(None);
    }
    let mut lock_path = db_file.as_os_str().to_owned();
    lock_path.push(".migrate-lock");
    tokio::task::spawn_blocking(move || {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)?;
        file.lock()?;
        Ok(Some(file))
    })
    .await
    .map_err(std::io::Error::other)?
}
