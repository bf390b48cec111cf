//! WriteBytes for every front end that receives a file in pieces: the
//! upload is admitted as one of the caller's streams, its first message
//! says where to write, and the pieces reach the tier on a blocking thread
//! as they arrive, at most [`PIECES_IN_FLIGHT`] held between the two.

use super::{Caller, Service, blocking};
use crate::access::Op;
use crate::backend::{Precondition, WriteOutcome};
use crate::error::{Error, Result};
use crate::path::VfsPath;
use tokio::sync::mpsc;
use tokio_stream::{Stream, StreamExt};

/// Pieces of a file buffered between the network and the tier (an upload's
/// queue, a download's): two keep both busy while bounding memory to a few
/// MiB per stream.
pub const PIECES_IN_FLIGHT: usize = 2;

/// Bytes around an upload's piece in its request message (the gRPC prefix,
/// the field's tag and length), given back with the piece.
const PIECE_FRAMING_BYTES: u64 = 16;

/// One message of an upload, as the front end decoded it.
#[derive(Debug, PartialEq, Eq)]
pub enum UploadMessage {
    /// Where to write (the path as the client wrote it, parsed only when
    /// this is the first message) and on what condition.
    Start(String, Precondition),
    /// The next piece of the content.
    Piece(Vec<u8>),
    /// A message that is neither (a field this server does not know).
    Neither,
}

impl Service {
    /// Stores an upload as its messages arrive: admits it as one of the
    /// caller's streams, takes the first message as its start
    /// (INVALID_ARGUMENT otherwise), checks the `write` grant, then writes
    /// the pieces on a blocking thread, giving each piece's bytes back to
    /// the caller's memory account as the tier takes it. The upload commits
    /// when the messages end; it is refused with RESOURCE_EXHAUSTED as soon
    /// as it passes the size limit, and a failed or misplaced message aborts
    /// it, leaving the file as it was.
    pub async fn upload(
        &self,
        caller: &Caller,
        mut messages: impl Stream<Item = Result<UploadMessage>> + Unpin + Send,
    ) -> Result<WriteOutcome> {
        let _permit = self.admit_stream(caller)?;
        let (path, pre) = match messages.next().await.transpose()? {
            Some(UploadMessage::Start(path, pre)) => (VfsPath::parse(&path)?, pre),
            _ => {
                return Err(Error::InvalidArgument(
                    "the first WriteBytes message must be a header".into(),
                ));
            }
        };
        caller.check(&path, Op::Write)?;
        // The bounded channel keeps at most PIECES_IN_FLIGHT pieces in memory.
        let (tx, rx) = mpsc::channel::<Result<Vec<u8>>>(PIECES_IN_FLIGHT);
        let writer = self.write_pieces(caller, path, pre, rx);
        let feed = async move {
            loop {
                let piece = match messages.next().await {
                    // Dropping `tx` ends the pieces: the tier commits.
                    None => return Ok(()),
                    Some(Ok(UploadMessage::Piece(data))) => Ok(data),
                    Some(Ok(_)) => Err(Error::InvalidArgument(
                        "only the first WriteBytes message may be a header".into(),
                    )),
                    Some(Err(err)) => Err(err),
                };
                let failed = piece.as_ref().err().cloned();
                if tx.send(piece).await.is_err() {
                    // The tier stopped early (the size limit, a conflict):
                    // its error is the answer.
                    return Ok(());
                }
                if let Some(err) = failed {
                    // The tier aborts on the same error; nothing is written.
                    return Err(err);
                }
            }
        };
        let (fed, written) = tokio::join!(feed, writer);
        fed?;
        written
    }

    /// Writes `pieces` to `path` on a blocking thread as they arrive, until
    /// the sender is dropped (commit) or a piece is an `Err` (abort).
    async fn write_pieces(
        &self,
        caller: &Caller,
        path: VfsPath,
        pre: Precondition,
        mut pieces: mpsc::Receiver<Result<Vec<u8>>>,
    ) -> Result<WriteOutcome> {
        let (backend, scope, max, account) = (
            self.backend_for(caller).await?,
            caller.scope.clone(),
            self.max_file_bytes,
            caller.account.clone(),
        );
        blocking(move || {
            let mut size = 0u64;
            let mut counted = std::iter::from_fn(|| {
                let piece = pieces.blocking_recv()?;
                Some(piece.and_then(|data| {
                    // The transport charged the piece's message as it
                    // arrived; the tier holds it now.
                    account.release(data.len() as u64 + PIECE_FRAMING_BYTES);
                    size += data.len() as u64;
                    Error::check_file_size(&path, size, max).map(|()| data)
                }))
            });
            backend.write_chunks(&scope, &path, pre, &mut counted)
        })
        .await
    }
}
