//! The OpenAPI document, generated from the handlers' annotations and the request and response
//! types themselves, so it cannot drift from the code. Served at `GET /openapi.json`.

use axum::Json;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

/// The API's document.
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
        super::crawls::start,
        super::crawls::read,
        super::crawls::pages,
        super::crawls::cancel,
        super::sessions::open,
        super::sessions::act,
        super::sessions::preview,
        super::sessions::replay,
        super::sessions::close,
        super::health::healthz,
        super::health::metrics,
    ),
    modifiers(&BearerAuth, &ClientErrors),
    tags(
        (name = "jobs", description = "submit, follow and cancel jobs"),
        (name = "fetch", description = "fetch a URL synchronously"),
        (name = "pages", description = "read and grep stored pages"),
        (name = "crawls", description = "crawl sites"),
        (name = "archive", description = "search the archive"),
        (name = "sessions", description = "drive a browser step by step (agents)"),
        (name = "health", description = "health and metrics"),
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
/// status the server sends: 401 on protected routes, 400 and 422 for bad parameters, 413
/// and 415 for bad bodies.
struct ClientErrors;

impl Modify for ClientErrors {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};
        let error = |description: &str| {
            ResponseBuilder::new()
                .description(description)
                .content(
                    "application/json",
                    ContentBuilder::new()
                        .schema(Some(Ref::from_schema_name("ErrorBody")))
                        .build(),
                )
                .build()
        };
        for (path, item) in openapi.paths.paths.iter_mut() {
            let public = path == "/healthz";
            for operation in [&mut item.get, &mut item.post, &mut item.delete]
                .into_iter()
                .flatten()
            {
                let has_body = operation.request_body.is_some();
                let has_params =
                    has_body || operation.parameters.as_ref().is_some_and(|p| !p.is_empty());
                let responses = &mut operation.responses.responses;
                let mut add = |status: &str, description: &str| {
                    responses
                        .entry(status.to_owned())
                        .or_insert_with(|| error(description).into());
                };
                if !public {
                    add(
                        "401",
                        "missing or invalid bearer token (when tokens are configured)",
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

/// Serves the document.
pub async fn document() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}
