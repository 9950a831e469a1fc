//! What the two engines do differently, as the hooks the shared queries call. The queries of
//! `jobs`, `pages`, `crawls` and `sessions` are written once: their SQL uses `$N` parameters
//! (which SQLite reads as PostgreSQL does), `CAST(… AS …)` and `ON CONFLICT`, and a macro in
//! each of those files implements them on both engines' stores. Each engine implements
//! [`Dialect`] in its own file.
//!
//! Not here: the shared statements themselves (the capability files), and the operations each
//! engine writes its own way throughout (marking pages archived, listing queued jobs,
//! cancelling a crawl: each engine's file).

use super::Error;
use super::writer::PendingPage;

/// The sqlx database of an engine's store.
pub(super) type Db<S> = <S as Dialect>::Db;

/// A transaction on an engine's store.
pub(super) type Tx<S> = sqlx::Transaction<'static, Db<S>>;

/// What differs between the engines' SQL. Implemented by each engine's store.
pub(super) trait Dialect {
    /// The sqlx database.
    type Db: sqlx::Database;

    /// Appended to a `SELECT` whose rows the transaction then writes. PostgreSQL locks them
    /// (its transactions run at READ COMMITTED); SQLite's write transaction holds the whole
    /// database already, and has no such clause.
    const FOR_UPDATE: &'static str;

    /// Appended to `ORDER BY` a text column so that both engines sort in byte order (SQLite's
    /// own order; PostgreSQL's default follows the database's locale).
    const BYTE_ORDER: &'static str;

    /// Appended to the `SET` list of the statement that ends one job: SQLite numbers the job
    /// there (its single writer commits in that order); PostgreSQL numbers ended jobs later,
    /// in [`Dialect::number_ended`].
    const DONE_SEQ: &'static str;

    /// The jobs' `status` column where a condition on it stands beside a list of job ids.
    /// SQLite's planner has no statistics: it guesses that a status matches ten rows, and for
    /// ten ids or more it walks the status index, reading every queued job (100,000 rows a
    /// statement early in a 100,000-page crawl), instead of looking each id up. Its unary `+`
    /// keeps the column off any index; PostgreSQL has statistics and no unary `+` on text.
    const STATUS_BESIDE_IDS: &'static str;

    /// Begins a transaction that will write.
    async fn write_transaction(&self) -> Result<Tx<Self>, Error>;

    /// Appends the condition that `ids` holds the value before it: `IN (…)` or `= ANY(…)`.
    fn push_in(builder: &mut sqlx::QueryBuilder<Self::Db>, ids: &[&str]);

    /// The condition that the text `column` starts with the text parameter `prefix`.
    fn starts_with(column: &str, prefix: &str) -> String;

    /// Gives the jobs `ids`, just ended in `tx`, their `done_seq` when the engine did not in
    /// the statement that ended them ([`Dialect::DONE_SEQ`]). The last statement before the
    /// commit.
    async fn number_ended(tx: &mut Tx<Self>, ids: &[&str]) -> Result<(), Error>;

    /// The statement that ends the jobs of `pages` as succeeded, first end wins, a cancel
    /// request winning over the result (see `Batches::commit_group`), returning the `id` and
    /// `status` of each job it ended.
    fn end_pages(pages: &[PendingPage]) -> sqlx::QueryBuilder<Self::Db>;

    /// Crawl URL keys added by one [`Dialect::add_crawl_keys`] statement at most.
    const CRAWL_KEYS_PER_INSERT: usize;

    /// The statement that adds `keys` to a crawl's seen set, returning the `url_key` of each
    /// key that was new to it.
    fn add_crawl_keys(crawl_id: &str, keys: &[&str]) -> sqlx::QueryBuilder<Self::Db>;
}
