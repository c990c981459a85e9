//! Sharded top-k on [`Cuda`]: the stages of the host's (`host.rs`) on the device, in stream
//! order, with no host synchronisation (the peers' status words are read when the outcome is
//! checked).

use cudarc::driver::{CudaSlice, CudaView, CudaViewMut};
use oxicub_kernels::families::listed_copy;

use super::plan::{peer_error, Call, Statement, STATUS_WORDS};
use super::{stage, strided, Communicator, ShardedBackend};
use crate::backend::Cuda;
use crate::radix::RadixKey;
use crate::sealed::Token;
use crate::segments::DeviceReport;
use crate::segments::{Outcome, Pending};
use crate::values::SourceIndex;
use crate::Error;

impl ShardedBackend for Cuda {
    fn agree_words<C: Communicator<Cuda>>(
        &self,
        token: Token,
        comm: &C,
        words: &[u64],
    ) -> Result<Vec<u64>, Error> {
        let send = self.upload(words)?;
        let mut all = self.alloc_zeros::<u64>(Statement::WORDS * comm.ranks())?;
        comm.grouped(token, self, &mut || {
            comm.all_gather(token, self, send.as_view(), all.as_view_mut())
        })?;
        // The agreement's one blocking read (documented at `Problem::agree`).
        self.download(&all.as_view())
    }

    fn sharded_checked<K: RadixKey, I: SourceIndex, C: Communicator<Cuda>>(
        &self,
        token: Token,
        call: Call<'_>,
        comm: &C,
        keys: CudaView<'_, K>,
        mut out_keys: CudaViewMut<'_, K>,
        mut out_indices: CudaViewMut<'_, I>,
    ) -> Result<Outcome, Error> {
        let exchange = call.exchange;
        let ranks = comm.ranks();
        let (rows, slot, candidates) = (exchange.rows, exchange.slot, exchange.candidates);
        let n = exchange.slot_items();
        let gathered = n * ranks;
        // Nothing to join or merge without rows (or with k = 0).
        let receives = call.receives && exchange.written > 0 && rows * candidates > 0;
        let joined = if receives { rows * candidates } else { 0 };
        // Three allocations a call, carved into the stages' buffers: keys (sent, gathered,
        // joined), indices (local, sent, gathered, joined), status words (this rank's, then
        // every rank's). One element at least: an empty allocation has no pointer.
        let mut keys_buffer = self.alloc_keys::<K>((n + gathered + joined).max(1))?;
        let mut indices_buffer = self.alloc_values::<I>((2 * n + gathered + joined).max(1))?;
        let mut keys_all = keys_buffer.as_view_mut();
        let (mut send_keys, mut rest) = keys_all.split_at_mut(n);
        let (mut keys_in, mut joined_keys) = rest.split_at_mut(gathered);
        let mut indices_all = indices_buffer.as_view_mut();
        let (mut local, mut rest) = indices_all.split_at_mut(n);
        let (mut send_indices, mut rest) = rest.split_at_mut(n);
        let (mut indices_in, mut joined_indices) = rest.split_at_mut(gathered);
        // The stages' own outcomes, checked with the peers' status (checking one now would
        // wait for the stream between the stages).
        let mut stages = Vec::with_capacity(2);
        let mut call = call;
        if call.local.is_ok() && exchange.local_k[call.rank] > 0 {
            // A failure here (keys of another device, a kernel that does not load) is this
            // rank's own: it still joins the exchange, and its peers report it.
            let local_stage = || -> Result<Outcome, Error> {
                let local_k = exchange.local_k[call.rank];
                let len = exchange.lens[call.rank];
                let problem = strided(len, local_k, call.direction, rows, slot)?;
                let outcome = stage(
                    self,
                    &problem,
                    call.contract,
                    keys,
                    None,
                    send_keys.slice_mut(..),
                    local.slice_mut(..),
                )?;
                // The global indices: this rank's columns start at its offset.
                let offset = exchange.offsets[call.rank] as i64;
                listed_copy::gather_adding(
                    self.runtime(),
                    self.stream(),
                    &[local.as_view()],
                    &[offset],
                    &mut send_indices,
                )?;
                Ok(outcome)
            };
            match local_stage() {
                Ok(outcome) => stages.push(outcome),
                Err(error) => call.local = Err(error),
            }
        }
        let mut words = vec![0u64; STATUS_WORDS * (1 + ranks)];
        words[..STATUS_WORDS].copy_from_slice(&call.status());
        let mut status = self.upload(&words)?;
        {
            let mut status_all = status.as_view_mut();
            let (mine, mut status_in) = status_all.split_at_mut(STATUS_WORDS);
            comm.grouped(token, self, &mut || {
                comm.all_gather(token, self, send_keys.as_view(), keys_in.slice_mut(..))?;
                comm.all_gather(
                    token,
                    self,
                    send_indices.as_view(),
                    indices_in.slice_mut(..),
                )?;
                comm.all_gather(token, self, mine.as_view(), status_in.slice_mut(..))
            })?;
        }
        call.local?;
        if receives {
            let (runtime, stream) = (self.runtime(), self.stream());
            for (start, column, count) in exchange.joins() {
                let from = start..start + n;
                listed_copy::copy_rows(
                    runtime,
                    stream,
                    &keys_in.as_view().slice(from.clone()),
                    slot,
                    &mut joined_keys.slice_mut(column..),
                    candidates,
                    count,
                    rows,
                )?;
                listed_copy::copy_rows(
                    runtime,
                    stream,
                    &indices_in.as_view().slice(from),
                    slot,
                    &mut joined_indices.slice_mut(column..),
                    candidates,
                    count,
                    rows,
                )?;
            }
            let written = rows * exchange.written;
            let merge = strided(
                candidates,
                exchange.written,
                call.direction,
                rows,
                exchange.written,
            )?;
            stages.push(stage(
                self,
                &merge,
                call.contract,
                joined_keys.as_view(),
                Some(joined_indices.as_view()),
                out_keys.slice_mut(..written),
                out_indices.slice_mut(..written),
            )?);
        }
        let report = PeerStatus {
            status,
            rank: call.rank,
            cuda: self.clone(),
            stages,
        };
        Ok(Pending::device((), Box::new(report)))
    }
}

/// The peers' status words of one call (after this rank's own) and its stages' outcomes, read
/// when its outcome is checked: the peers' first (a failed peer's candidates make the stages'
/// checks moot).
struct PeerStatus {
    status: CudaSlice<u64>,
    rank: usize,
    cuda: Cuda,
    stages: Vec<Outcome>,
}

impl std::fmt::Debug for PeerStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerStatus")
            .field("rank", &self.rank)
            .finish_non_exhaustive()
    }
}

impl DeviceReport for PeerStatus {
    fn wait(&self) -> Result<(), Error> {
        let all = self
            .cuda
            .download(&self.status.as_view().slice(STATUS_WORDS..))?;
        if let Some(error) = peer_error(self.rank, &all) {
            return Err(error);
        }
        self.stages.iter().try_for_each(Outcome::check_replay)
    }
}
