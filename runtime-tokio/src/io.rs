//! Socket helpers.

use std::io::{self, IoSlice};

use tokio::io::{AsyncWrite, AsyncWriteExt};

/// Writes `header` then `body` with vectored writes until both are out.
pub(crate) async fn write_frame<W: AsyncWrite + Unpin>(
    w: &mut W,
    header: &[u8],
    body: &[u8],
) -> io::Result<()> {
    let mut slices = [IoSlice::new(header), IoSlice::new(body)];
    let mut pending = &mut slices[..];
    while !pending.is_empty() {
        let n = w.write_vectored(pending).await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        IoSlice::advance_slices(&mut pending, n);
    }
    // A TLS stream may hold the last record; a TCP stream's flush does nothing.
    w.flush().await
}
