//! The status page at `/` on the HTTP port: one self-contained HTML page (no build step, no
//! external assets) that polls `/status` and shows the role, offsets, the fence state, and each
//! replica with its lag over the last minutes as a small chart. `?every=MS` sets the refresh
//! interval (default 1000 ms).

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
        // ("http" alone also starts the key name httpAuthToken, which the page mentions.)
        let absolute = HTML.match_indices("http://").chain(HTML.match_indices("https://"));
        for (i, _) in absolute {
            let rest = &HTML[i..];
            assert!(
                rest.starts_with("http://www.w3.org/"),
                "external URL at {i}: {}",
                &rest[..40.min(rest.len())]
            );
        }
    }
}
