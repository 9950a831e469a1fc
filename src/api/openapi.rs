//! The OpenAPI document, generated from the handlers' annotations and the request and response
//! types themselves, so it cannot drift from the code. Served at `GET /openapi.json`.

use axum::Json;
use axum::http::Method;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

/// The API's document.
#[allow(deprecated)] // `GET /v1/search`, archive search's former path, is documented as deprecated
#[derive(OpenApi)]
#[openapi(
    info(title = "trawl", description = "Job-queue batch crawler and archiver for AI agents and RAG pipelines"),
    paths(
        super::jobs::submit,
        super::jobs::list,
        super::jobs::batch,
        super::jobs::read,
        super::jobs::cancel,
        super::jobs::events,
        super::fetch::fetch,
        super::pages::read,
        super::pages::grep,
        super::search::search,
        super::search::search_deprecated,
        super::web_search::search,
        super::web_search::images,
        super::crawls::start,
        super::crawls::read,
        super::crawls::pages,
        super::crawls::cancel,
        super::sessions::open,
        super::sessions::list,
        super::sessions::read,
        super::sessions::act,
        super::sessions::preview,
        super::sessions::replay,
        super::sessions::close,
        super::health::healthz,
        super::health::metrics,
        super::firecrawl::scrape::scrape_v1,
        super::firecrawl::scrape::scrape_v2,
        super::firecrawl::scrape::batch_start_v1,
        super::firecrawl::scrape::batch_start_v2,
        super::firecrawl::scrape::batch_status_v1,
        super::firecrawl::scrape::batch_status_v2,
        super::firecrawl::crawl::crawl_start_v1,
        super::firecrawl::crawl::crawl_start_v2,
        super::firecrawl::crawl::crawl_status_v1,
        super::firecrawl::crawl::crawl_status_v2,
        super::firecrawl::crawl::crawl_cancel_v1,
        super::firecrawl::crawl::crawl_cancel_v2,
        super::firecrawl::map::map_v1,
        super::firecrawl::map::map_v2,
        super::firecrawl::search::search_v1,
        super::firecrawl::search::search_v2,
    ),
    modifiers(&BearerAuth, &ClientErrors, &NamedJobKinds),
    tags(
        (name = "jobs", description = "submit, follow and cancel jobs"),
        (name = "fetch", description = "fetch a URL synchronously"),
        (name = "pages", description = "read and grep stored pages"),
        (name = "crawls", description = "crawl sites"),
        (name = "archive", description = "search the archive"),
        (name = "web search", description = "search the web (SearxNG, DuckDuckGo) and images"),
        (name = "sessions", description = "drive a browser step by step (agents)"),
        (name = "health", description = "health and metrics"),
        (name = "firecrawl", description = "Firecrawl-compatible scrape, crawl, map, batch scrape and search (v1 and v2 shapes)"),
    )
)]
pub struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// Documents the client errors every route may answer with, so the document lists every
/// status the server sends: 421 for a `Host` that is not allowed (every route), 401 and 429
/// (rate limits) on protected routes, 403 for a change asked from another origin, 409 for an
/// `Idempotency-Key` reused on the creating routes, 400 and 422 for bad parameters, 413 and
/// 415 for bad bodies.
struct ClientErrors;

impl Modify for ClientErrors {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};
        let error = |description: &str, schema: &str| {
            ResponseBuilder::new()
                .description(description)
                .content(
                    "application/json",
                    ContentBuilder::new()
                        .schema(Some(Ref::from_schema_name(schema)))
                        .build(),
                )
                .build()
        };
        for (path, item) in openapi.paths.paths.iter_mut() {
            let public = path == "/healthz";
            let idempotent = ["/v1/jobs", "/v1/crawls", "/v1/sessions"].contains(&path.as_str())
                || super::firecrawl::CREATING_ROUTES.contains(&path.as_str());
            // (the operation, its method, whether it changes something, whether it creates)
            for (operation, method, changes, creates) in [
                (&mut item.get, Method::GET, false, false),
                (&mut item.post, Method::POST, true, true),
                (&mut item.delete, Method::DELETE, true, false),
            ]
            .into_iter()
            .filter_map(|(operation, method, changes, creates)| {
                operation
                    .as_mut()
                    .map(|operation| (operation, method, changes, creates))
            }) {
                // The Firecrawl-compatible routes answer every error in Firecrawl's shape.
                let schema = if super::firecrawl::is_compat(&method, path) {
                    "FirecrawlError"
                } else {
                    "ErrorBody"
                };
                let has_body = operation.request_body.is_some();
                let has_params =
                    has_body || operation.parameters.as_ref().is_some_and(|p| !p.is_empty());
                let responses = &mut operation.responses.responses;
                let mut add = |status: &str, description: &str| {
                    responses
                        .entry(status.to_owned())
                        .or_insert_with(|| error(description, schema).into());
                };
                add(
                    "421",
                    "the Host header names no allowed host (api.allowed_hosts)",
                );
                if !public {
                    add(
                        "401",
                        "missing or invalid bearer token (when tokens are configured)",
                    );
                    add(
                        "429",
                        "rate_limited: too many requests from this client (see Retry-After)",
                    );
                }
                if changes {
                    add(
                        "403",
                        "forbidden_origin: asked by a web page of another origin",
                    );
                }
                if creates && idempotent {
                    add(
                        "409",
                        "idempotency_conflict: the Idempotency-Key was used for another request",
                    );
                }
                if has_params {
                    add("400", "malformed request");
                    add("422", "a field has the wrong type or value");
                }
                if has_body {
                    add("413", "request body too large");
                    add("415", "body is not application/json");
                }
            }
        }
    }
}

/// Names each kind of [`Job`](trawl_workers::job::Job) as a schema of its own
/// (`FetchJobWithKind`: the `FetchJob` fields and `"kind": "fetch"`), so `Job` is a `oneOf` of
/// references. utoipa writes the kinds inline (`allOf` inside `oneOf`), which client
/// generators such as openapi-python-client cannot parse: they dropped `POST /v1/jobs`.
struct NamedJobKinds;

impl Modify for NamedJobKinds {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::schema::Schema;
        use utoipa::openapi::{Ref, RefOr};
        let Some(components) = openapi.components.as_mut() else {
            return;
        };
        let Some(RefOr::T(Schema::OneOf(kinds))) = components.schemas.get_mut("Job") else {
            return;
        };
        let mut named = Vec::new();
        for item in &mut kinds.items {
            let RefOr::T(Schema::AllOf(all_of)) = item else {
                continue;
            };
            let Some(base) = all_of.items.iter().find_map(|part| match part {
                RefOr::Ref(reference) => {
                    reference.ref_location.rsplit('/').next().map(str::to_owned)
                }
                RefOr::T(_) => None,
            }) else {
                continue;
            };
            let name = format!("{base}WithKind");
            let schema = std::mem::replace(item, RefOr::Ref(Ref::from_schema_name(&name)));
            named.push((name, schema));
        }
        components.schemas.extend(named);
    }
}

/// Serves the document.
pub async fn document() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    /// Client generators name methods after operation ids and build URLs from the path
    /// parameters: a duplicate id, or a query parameter declared in the path, breaks them
    /// (scripts/openapi.sh runs a real validator and generator over the served document).
    #[test]
    fn operation_ids_are_unique_and_parameters_sit_where_they_are_sent() {
        let document = serde_json::to_value(ApiDoc::openapi()).expect("the document serialises");
        let paths = document["paths"].as_object().expect("paths");
        let mut ids = HashSet::new();
        for (path, item) in paths {
            let templated: HashSet<&str> = path
                .split('/')
                .filter_map(|part| part.strip_prefix('{')?.strip_suffix('}'))
                .collect();
            for (method, operation) in item.as_object().expect("path item") {
                let id = operation["operationId"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{method} {path} has no operationId"));
                assert!(ids.insert(id.to_owned()), "operationId {id} twice");
                let parameters = operation["parameters"].as_array().cloned();
                let in_path: HashSet<&str> = operation["parameters"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|parameter| parameter["in"] == "path")
                    .filter_map(|parameter| parameter["name"].as_str())
                    .collect();
                assert_eq!(in_path, templated, "{method} {path}: {parameters:?}");
            }
        }
    }

    #[test]
    fn each_job_kind_is_a_named_schema() {
        let document = serde_json::to_value(ApiDoc::openapi()).expect("the document serialises");
        let schemas = &document["components"]["schemas"];
        let kinds = schemas["Job"]["oneOf"].as_array().expect("Job is a oneOf");
        let refs: Vec<&str> = kinds
            .iter()
            .filter_map(|kind| kind["$ref"].as_str())
            .collect();
        assert_eq!(
            refs,
            [
                "#/components/schemas/FetchJobWithKind",
                "#/components/schemas/BrowseJobWithKind",
                "#/components/schemas/SearchJobWithKind"
            ]
        );
        assert_eq!(
            schemas["FetchJobWithKind"]["allOf"][1]["properties"]["kind"]["enum"][0],
            "fetch"
        );
    }

    #[test]
    fn line_numbers_start_at_one() {
        let document = serde_json::to_value(ApiDoc::openapi()).expect("the document serialises");
        let parameters = document["paths"]["/v1/pages"]["get"]["parameters"]
            .as_array()
            .expect("parameters");
        for name in ["from", "to"] {
            let parameter = parameters
                .iter()
                .find(|parameter| parameter["name"] == name)
                .expect(name);
            assert_eq!(parameter["in"], "query");
            assert_eq!(parameter["schema"]["minimum"], 1, "{parameter}");
        }
    }
}
