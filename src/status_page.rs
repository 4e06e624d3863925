//! The status page at `/` on the HTTP port: one self-contained HTML page (no build step, no
//! external assets) that polls `/status` and shows the role, offsets, the fence state, and each
//! replica with its lag over the last minutes as a small chart. `?every=MS` sets the refresh
//! interval (default 1000 ms).
//!
//! On a broker with `httpAuthToken`, open it as `/#token=TOKEN`: the fragment never reaches
//! the server (nor its logs, nor a proxy's); the page keeps the token in the tab's
//! `sessionStorage`, removes it from the address bar, and sends it as a bearer token to
//! `/status`. Without one it asks for the token after the first 401.

use axum::http::header;
use axum::response::IntoResponse;

/// The page.
pub const HTML: &str = include_str!("status_page.html");

/// `GET /`.
pub async fn page() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8"), (header::CACHE_CONTROL, "no-cache")], HTML)
}

#[cfg(test)]
mod tests {
    use super::HTML;

    #[test]
    fn the_page_loads_nothing_from_elsewhere() {
        for needle in ["<script src", "<link", "@import", "url(", "<img", "<iframe", "cdn", "//fonts."] {
            assert!(!HTML.contains(needle), "the page refers to an external asset: {needle}");
        }
        // The only absolute URLs are XML namespaces.
        let urls = HTML.match_indices("http://").chain(HTML.match_indices("https://"));
        for (i, _) in urls {
            let rest = &HTML[i..];
            assert!(
                rest.starts_with("http://www.w3.org/"),
                "external URL at {i}: {}",
                &rest[..40.min(rest.len())]
            );
        }
    }
}
