//! Archive search (`GET /ui/search?q=&host=&after=&before=&as_of=`): the form, and the hits
//! of the caller's tenant as the API's `/v1/search` finds them, each with its heading path,
//! its highlighted passage and a link to the page viewer.
//!
//! Not here: the ranking (`trawl_workers::archive::index`).

use axum::Extension;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use maud::{Markup, PreEscaped, html};
use serde::Deserialize;
use trawl_workers::archive::index::{self, Hit, SearchQuery};

use super::Ui;
use super::auth::Viewer;
use super::layout::{self, Nav, UiError, time};
use super::markdown;

/// The search form's fields (all optional; no `q`: the form alone).
#[derive(Debug, Clone, Default, Deserialize)]
pub(super) struct SearchForm {
    #[serde(default)]
    q: String,
    #[serde(default)]
    host: String,
    #[serde(default)]
    after: String,
    #[serde(default)]
    before: String,
    #[serde(default)]
    as_of: String,
}

fn some(text: &str) -> Option<String> {
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// Runs a search; `Err` is a message for the form.
async fn run(ui: &Ui, viewer: &Viewer, form: &SearchForm) -> Result<Vec<Hit>, String> {
    let Some(archive) = ui.app.archive.clone() else {
        return Err("This server has no archive index to search.".to_owned());
    };
    let instant = |value: &str, name: &str| {
        some(value)
            .map(|text| crate::archive::parse_instant(&text))
            .transpose()
            .map_err(|error| format!("{name}: {error}"))
    };
    let query = SearchQuery {
        text: form.q.clone(),
        host: some(&form.host),
        after: instant(&form.after, "after")?,
        before: instant(&form.before, "before")?,
        as_of: instant(&form.as_of, "as of")?,
        k: 20,
        per_page: archive.per_page,
        tenant: viewer.scope.filter().map(str::to_owned),
    };
    tokio::task::spawn_blocking(move || archive.index.search(&query))
        .await
        .map_err(|error| error.to_string())?
        .map_err(|error| match error {
            index::Error::Query(message) => format!("The query does not parse: {message}"),
            other => other.to_string(),
        })
}

/// `GET /ui/search`.
pub(super) async fn page(
    State(ui): State<Ui>,
    Extension(viewer): Extension<Viewer>,
    Query(form): Query<SearchForm>,
) -> Result<(StatusCode, Markup), UiError> {
    let searched = !form.q.trim().is_empty();
    let outcome = if searched {
        Some(run(&ui, &viewer, &form).await)
    } else {
        None
    };
    let status = match &outcome {
        Some(Err(_)) => StatusCode::BAD_REQUEST,
        _ => StatusCode::OK,
    };
    let body = html! {
        h1 { "Archive search" }
        form.card.search-form method="get" action="/ui/search" role="search" {
            div.q {
                label for="q" { "Query" }
                input #q type="search" name="q" value=(form.q) aria-describedby="q-hint" autofocus[!searched];
                p.hint #q-hint { "tantivy's query language: " code { "\"a phrase\"" } ", " code { "+required" } ", " code { "-excluded" } ", " code { "title:word" } "." }
            }
            div { label for="host" { "Host" } input #host type="text" name="host" value=(form.host) placeholder="example.com"; }
            div { label for="after" { "Fetched after" } input #after type="text" name="after" value=(form.after) placeholder="2026-01-01"; }
            div { label for="before" { "Fetched before" } input #before type="text" name="before" value=(form.before) placeholder="2026-12-31"; }
            div { label for="as_of" { "As of" } input #as_of type="text" name="as_of" value=(form.as_of) placeholder="2026-06-01T12:00:00Z"; }
            div { button type="submit" { "Search" } }
        }
        @match &outcome {
            None => {}
            Some(Err(message)) => { p.card.error role="alert" { (message) } }
            Some(Ok(hits)) => {
                h2 #hits-h { (hits.len()) " " (if hits.len() == 1 { "hit" } else { "hits" }) }
                @if hits.is_empty() {
                    p.muted { "Nothing archived matches." }
                }
                ol.hits aria-labelledby="hits-h" {
                    @for hit in hits {
                        li {
                            h3 { a href={ "/ui/pages/" (hit.page_id) } { (hit.title.as_deref().unwrap_or(&hit.url)) } }
                            @if !hit.headings.is_empty() {
                                p.path { @for (n, heading) in hit.headings.iter().enumerate() {
                                    @if n > 0 { " › " } (heading)
                                } }
                            }
                            p { (PreEscaped(markdown::snippet(&hit.snippet))) }
                            p.url { (hit.url) " · " (time(&hit.fetched_at)) " · score " (format!("{:.2}", hit.score)) }
                        }
                    }
                }
            }
        }
    };
    Ok((
        status,
        layout::page(Some(&viewer), "Archive search", Nav::Search, body),
    ))
}
