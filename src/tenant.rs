//! Tenants: who owns what. Every job, batch, crawl, page, session and archive chunk carries
//! the name of the tenant it was made for ([`Tenant`]); what a caller may see is its
//! [`Scope`]: its own tenant's objects, or, for the admin token, every tenant's. Another
//! tenant's object is not found (404), never forbidden, so its existence is not revealed.
//!
//! The API resolves a bearer token to its scope (`api::auth`); the command line, and a server
//! without tokens, act as [`DEFAULT`]. Existing data was given to [`DEFAULT`] by the migration
//! that added tenants.
//!
//! Not here: which token belongs to which tenant (`api::Config`), and the filters themselves
//! (each store query takes the scope's [`Scope::filter`]).

use serde::{Deserialize, Serialize};

/// The tenant of the command line, of a server without tokens, of the first bare token of
/// `api.tokens`, and of everything stored before tenants existed.
pub const DEFAULT: &str = "default";

/// Longest tenant name.
const MAX_NAME: usize = 64;

/// A tenant's name: 1 to 64 ASCII letters, digits, `-`, `_` or `.`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Tenant(String);

impl Tenant {
    /// The tenant named `name`, when the name is valid.
    pub fn new(name: &str) -> Result<Tenant, String> {
        if name.is_empty()
            || name.len() > MAX_NAME
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err(format!(
                "tenant {name:?} must be 1 to {MAX_NAME} ASCII letters, digits, '-', '_' or '.'"
            ));
        }
        Ok(Tenant(name.to_owned()))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for Tenant {
    /// The [`DEFAULT`] tenant.
    fn default() -> Self {
        Tenant(DEFAULT.to_owned())
    }
}

impl std::fmt::Display for Tenant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a caller may see, and the tenant what it creates belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Scope {
    /// The tenant of the objects it creates.
    pub tenant: Tenant,
    /// Sees every tenant's objects (the admin token).
    pub all: bool,
}

impl Scope {
    /// One tenant's scope.
    pub fn of(tenant: Tenant) -> Scope {
        Scope { tenant, all: false }
    }

    /// The admin's scope: every tenant's objects; creates in [`DEFAULT`].
    pub fn admin() -> Scope {
        Scope {
            tenant: Tenant::default(),
            all: true,
        }
    }

    /// The tenant a query is restricted to: `None` for the admin (no restriction). Store
    /// queries bind it as `(CAST($n AS TEXT) IS NULL OR tenant = CAST($n AS TEXT))`.
    pub fn filter(&self) -> Option<&str> {
        (!self.all).then(|| self.tenant.as_str())
    }

    /// Whether an object of `tenant` is visible in this scope.
    pub fn sees(&self, tenant: &str) -> bool {
        self.all || self.tenant.as_str() == tenant
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_and_scopes_filter() {
        assert!(Tenant::new("acme-1.eu_west").is_ok());
        assert!(Tenant::new("").is_err());
        assert!(Tenant::new("has space").is_err());
        assert!(Tenant::new(&"x".repeat(65)).is_err());
        let acme = Scope::of(Tenant::new("acme").expect("valid"));
        assert_eq!(acme.filter(), Some("acme"));
        assert!(acme.sees("acme"));
        assert!(!acme.sees(DEFAULT));
        let admin = Scope::admin();
        assert_eq!(admin.filter(), None);
        assert!(admin.sees("acme") && admin.sees(DEFAULT));
        assert_eq!(Scope::default().filter(), Some(DEFAULT));
    }
}
