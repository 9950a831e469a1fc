//! The stores a crawl run writes to, seen from outside: the stored pages of a SQLite store
//! (`sqlite3`) or a PostgreSQL database (`psql`), and a fresh PostgreSQL database per
//! distributed run, dropped when its value is. It does not check the pages it reads.

use std::path::Path;
use std::process::Command;

use crate::Result;

/// `(url, final_url)` of every stored page of a SQLite store.
pub(crate) fn sqlite_pages(store: &Path) -> Result<Vec<(String, String)>> {
    let output = Command::new("sqlite3")
        .arg("-readonly")
        .arg("-separator")
        .arg("\t")
        .arg(store)
        .arg("SELECT url, final_url FROM pages")
        .output()
        .map_err(|e| format!("running sqlite3: {e}"))?;
    rows(output, "sqlite3")
}

/// `(url, final_url)` of every stored page of a PostgreSQL database.
pub(crate) fn psql_pages(host: &str, database: &str) -> Result<Vec<(String, String)>> {
    let output = Command::new("psql")
        .args([
            "-h", host, "-U", "postgres", "-d", database, "-AtF", "\t", "-c",
        ])
        .arg("SELECT url, final_url FROM pages")
        .output()
        .map_err(|e| format!("running psql: {e}"))?;
    rows(output, "psql")
}

pub(crate) fn rows(output: std::process::Output, tool: &str) -> Result<Vec<(String, String)>> {
    if !output.status.success() {
        return Err(format!(
            "{tool} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_once('\t'))
        .map(|(url, final_url)| (url.to_owned(), final_url.to_owned()))
        .collect())
}

/// A fresh PostgreSQL database; dropped (FORCE) when this value is.
pub(crate) struct Database {
    pub(crate) host: String,
    pub(crate) name: String,
}

impl Database {
    pub(crate) fn create(host: &str, index: usize) -> Result<Database> {
        let name = format!("trawl_bench_crawl_{}_{index}", std::process::id());
        psql(
            host,
            &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
        )?;
        psql(host, &format!("CREATE DATABASE {name}"))?;
        Ok(Database {
            host: host.to_owned(),
            name,
        })
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        if let Err(error) = psql(
            &self.host,
            &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
        ) {
            eprintln!("warning: could not drop database {}: {error}", self.name);
        }
    }
}

pub(crate) fn psql(host: &str, sql: &str) -> Result<()> {
    let output = Command::new("psql")
        .args([
            "-h", host, "-U", "postgres", "-d", "postgres", "-qAt", "-c", sql,
        ])
        .output()
        .map_err(|e| format!("running psql: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "psql -c {sql:?}: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}
