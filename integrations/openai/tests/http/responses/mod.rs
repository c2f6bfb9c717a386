//! The Responses transport over HTTP: the review scenarios against aimock's `/v1/responses`
//! (`scenarios`), what goes over the wire and how the server's errors end a run (`wire`), errors
//! inside a stream and cut streams from a canned server (`stream`), and a hostile server that
//! echoes the key (`hostile`).

mod hostile;
mod options;
pub(crate) mod scenarios;
mod stream;
mod wire;

use loopbound_openai::{ApiKey, Config, ResponsesTransport};

use crate::SECRET;

/// A Responses transport for the server at `base_url`, with the tests' key.
pub(crate) fn transport_to(base_url: &str, model: &str) -> ResponsesTransport {
    let config = Config::new(base_url, model)
        .expect("a valid URL")
        .with_api_key(ApiKey::new(SECRET).expect("a valid key"));
    ResponsesTransport::new(config).expect("the client builds")
}
