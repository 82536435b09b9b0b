//! The HTTP endpoint behind the download URLs of `local` locations: a local directory
//! cannot sign a URL, so the `download-request` controller hands out
//! `<base>/downloads/<id>?token=<token>` and this endpoint streams the object for a
//! token that is valid ([`super::download::Tokens`]: once, until the request expires).
//! A token that is unknown, used or expired gets a 403 that does not say which; an
//! object that is not in the store a 404. Requests are not logged (the token is in the
//! URL).

use super::download::Tokens;
use super::settings::VeleroSettings;
use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use granary_providers::{ErrorKind, ObjectStore};
use granary_runtime::clock::Clock;
use std::sync::Arc;
use tokio::net::TcpListener;

/// What a token opens: one object of one store.
#[derive(Clone)]
pub struct Served {
    pub store: Arc<dyn ObjectStore>,
    pub bucket: String,
    pub key: String,
}

pub type ServedTokens = Tokens<Served>;

/// The bound endpoint, before it serves.
pub struct DownloadEndpoint {
    listener: TcpListener,
    /// What every URL starts with (no trailing `/`).
    pub base: String,
}

#[derive(Clone)]
struct AppState {
    tokens: Arc<ServedTokens>,
    clock: Clock,
}

#[derive(serde::Deserialize)]
struct TokenQuery {
    #[serde(default)]
    token: String,
}

impl DownloadEndpoint {
    /// Binds `velero.downloadBindAddress`; the URL base is `velero.downloadURLBase`, else
    /// `http://<bound address>`.
    pub async fn bind(settings: &VeleroSettings) -> std::io::Result<Self> {
        let listener = TcpListener::bind(&settings.download_bind_address).await?;
        let base = match &settings.download_url_base {
            Some(b) => b.trim_end_matches('/').to_string(),
            None => format!("http://{}", listener.local_addr()?),
        };
        Ok(DownloadEndpoint { listener, base })
    }

    /// Serves until dropped.
    pub async fn serve(self, tokens: Arc<ServedTokens>, clock: Clock) {
        let app = Router::new()
            .route("/downloads/{id}", get(download))
            .with_state(AppState { tokens, clock });
        if let Err(e) = axum::serve(self.listener, app).await {
            tracing::error!(error = %e, "download endpoint stopped");
        }
    }
}

async fn download(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<TokenQuery>,
) -> Response {
    let Some(served) = state.tokens.redeem(&id, &q.token, state.clock.now()) else {
        return (
            StatusCode::FORBIDDEN,
            "this download URL is not valid: unknown, already used or expired\n",
        )
            .into_response();
    };
    let not_found = || (StatusCode::NOT_FOUND, "the object is not in the store\n").into_response();
    match served.store.get(&served.bucket, &served.key).await {
        Ok(stream) => (
            [(header::CONTENT_TYPE, "application/octet-stream")],
            Body::from_stream(stream),
        )
            .into_response(),
        Err(e) if e.kind() == ErrorKind::NotFound => not_found(),
        Err(e) => {
            tracing::warn!(error = %e, key = %served.key, "download endpoint: reading the object");
            (StatusCode::BAD_GATEWAY, "the object could not be read\n").into_response()
        }
    }
}
