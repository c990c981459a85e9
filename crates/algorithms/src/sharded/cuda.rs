//! Sharded top-k on [`Cuda`]: the stages of the host's (`host.rs`) on the device, in stream
//! order, with no host synchronisation (the peers' status words are read when the outcome is
//! checked).

use cudarc::driver::{CudaSlice, CudaView, CudaViewMut};
use oxicub_kernels::families::listed_copy;

use super::host::strided;
use super::plan::{peer_error, Call, Statement, STATUS_WORDS};
use super::{merge_pairs, select, Communicator, ShardedBackend};
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
        comm.all_gather(token, self, send.as_view(), all.as_view_mut())?;
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
        // One element at least: cudarc views of empty allocations are still valid pointers.
        let n = exchange.slot_items();
        let mut send_keys = self.alloc_keys::<K>(n.max(1))?;
        let mut send_indices = self.alloc_values::<I>(n.max(1))?;
        // The stages' own outcomes, checked with the peers' status (checking one now would
        // wait for the stream between the stages).
        let mut stages = Vec::with_capacity(2);
        if call.local.is_ok() && exchange.local_k[call.rank] > 0 {
            let local_k = exchange.local_k[call.rank];
            let len = exchange.lens[call.rank];
            let problem = strided(len, local_k, call.direction, exchange.rows, exchange.slot)?;
            let mut local = self.alloc_values::<I>(n)?;
            stages.push(select(
                self,
                &problem,
                call.prefer_larger,
                keys,
                send_keys.as_view_mut().slice_mut(..n),
                local.as_view_mut(),
            )?);
            // The global indices: this rank's columns start at its offset.
            let offset = exchange.offsets[call.rank] as i64;
            listed_copy::gather_adding(
                self.runtime(),
                self.stream(),
                &[local.as_view()],
                &[offset],
                &mut send_indices.as_view_mut().slice_mut(..n),
            )?;
        }
        let mut keys_in = self.alloc_keys::<K>((n * ranks).max(1))?;
        let mut indices_in = self.alloc_values::<I>((n * ranks).max(1))?;
        let status = self.upload(&call.status())?;
        let mut status_in = self.alloc_zeros::<u64>(STATUS_WORDS * ranks)?;
        comm.grouped(token, &mut || {
            comm.all_gather(
                token,
                self,
                send_keys.as_view().slice(..n),
                keys_in.as_view_mut().slice_mut(..n * ranks),
            )?;
            comm.all_gather(
                token,
                self,
                send_indices.as_view().slice(..n),
                indices_in.as_view_mut().slice_mut(..n * ranks),
            )?;
            comm.all_gather(token, self, status.as_view(), status_in.as_view_mut())
        })?;
        call.local?;
        let report = |stages| {
            let report = PeerStatus {
                status: status_in,
                rank: call.rank,
                cuda: self.clone(),
                stages,
            };
            Pending::device((), Box::new(report))
        };
        if !call.receives || exchange.written == 0 {
            return Ok(report(stages));
        }
        let joined = exchange.rows * exchange.candidates;
        let mut joined_keys = self.alloc_keys::<K>(joined)?;
        let mut joined_indices = self.alloc_values::<I>(joined)?;
        let (runtime, stream) = (self.runtime(), self.stream());
        let (slot, candidates, rows) = (exchange.slot, exchange.candidates, exchange.rows);
        for (start, column, count) in exchange.joins() {
            let from = start..start + n;
            listed_copy::copy_rows(
                runtime,
                stream,
                &keys_in.as_view().slice(from.clone()),
                slot,
                &mut joined_keys.as_view_mut().slice_mut(column..),
                candidates,
                count,
                rows,
            )?;
            listed_copy::copy_rows(
                runtime,
                stream,
                &indices_in.as_view().slice(from),
                slot,
                &mut joined_indices.as_view_mut().slice_mut(column..),
                candidates,
                count,
                rows,
            )?;
        }
        let written = exchange.rows * exchange.written;
        let merge = strided(
            exchange.candidates,
            exchange.written,
            call.direction,
            exchange.rows,
            exchange.written,
        )?;
        stages.push(merge_pairs(
            self,
            &merge,
            call.prefer_larger,
            joined_keys.as_view(),
            joined_indices.as_view(),
            out_keys.slice_mut(..written),
            out_indices.slice_mut(..written),
        )?);
        Ok(report(stages))
    }
}

/// The peers' status words of one call and its stages' outcomes, read when its outcome is
/// checked: the peers' first (a failed peer's candidates make the stages' checks moot).
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
        let all = self.cuda.download(&self.status.as_view())?;
        if let Some(error) = peer_error(self.rank, &all) {
            return Err(error);
        }
        self.stages.iter().try_for_each(Outcome::check_replay)
    }
}
