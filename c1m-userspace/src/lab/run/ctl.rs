//! How the lab reaches a side's control endpoint: a unix socket for its own children,
//! or (external clients) the server's TCP endpoint that the client hosts also reach,
//! guarded by a token the server writes into the run folder.

use std::path::PathBuf;

use anyhow::Result;

use crate::workload::control::{self, Token};

#[derive(Clone, Debug, Default)]
pub(crate) struct Ctl {
    pub endpoint: String,
    /// The token file the server writes as it starts: read at each call, since the lab
    /// calls before the server has written it.
    pub token_file: Option<PathBuf>,
}

impl Ctl {
    pub(crate) fn new(endpoint: String, token_file: Option<PathBuf>) -> Ctl {
        Ctl {
            endpoint,
            token_file,
        }
    }

    /// Sends one line and returns the answer line.
    pub(crate) async fn call(&self, line: &str) -> Result<String> {
        let token = match &self.token_file {
            Some(p) => Some(Token::read(p)?),
            None => None,
        };
        control::call_with_token(&self.endpoint, token.as_ref(), line).await
    }
}
