//! Sharded top-k on the host: the ranks are threads ([`HostRanks`](super::HostRanks)), and
//! each stage is the host backend's batched top-k, so the merge logic runs on CI exactly as the
//! device runs it.

use super::plan::{peer_error, Call, Statement, STATUS_WORDS};
use super::{stage, strided, Communicator, ShardedBackend};
use crate::backend::Host;
use crate::radix::RadixKey;
use crate::sealed::Token;
use crate::segments::Outcome;
use crate::values::SourceIndex;
use crate::Error;

impl ShardedBackend for Host {
    fn agree_words<C: Communicator<Host>>(
        &self,
        token: Token,
        comm: &C,
        words: &[u64],
    ) -> Result<Vec<u64>, Error> {
        let mut all = vec![0u64; Statement::WORDS * comm.ranks()];
        comm.grouped(token, self, &mut || {
            comm.all_gather(token, self, words, &mut all[..])
        })?;
        Ok(all)
    }

    fn sharded_checked<K: RadixKey, I: SourceIndex, C: Communicator<Host>>(
        &self,
        token: Token,
        call: Call<'_>,
        comm: &C,
        keys: &[K],
        out_keys: &mut [K],
        out_indices: &mut [I],
    ) -> Result<Outcome, Error> {
        let exchange = call.exchange;
        let n = exchange.slot_items();
        let zero = K::from_bits(Default::default());
        let (mut send_keys, mut send_indices) = (vec![zero; n], vec![I::from_index(0); n]);
        let mut call = call;
        if call.local.is_ok() && exchange.local_k[call.rank] > 0 {
            // A failure here is this rank's own: it still joins the exchange (as on the device).
            let local_k = exchange.local_k[call.rank];
            let len = exchange.lens[call.rank];
            let mut local = vec![I::from_index(0); n];
            let selected = strided(len, local_k, call.direction, exchange.rows, exchange.slot)
                .and_then(|problem| {
                    let keys_out = &mut send_keys[..];
                    stage(
                        self,
                        &problem,
                        call.contract,
                        keys,
                        None,
                        keys_out,
                        &mut local[..],
                    )
                })
                .and_then(Outcome::check);
            match selected {
                // The global indices: this rank's columns start at its offset.
                Ok(()) => {
                    let offset = exchange.offsets[call.rank];
                    for (global, local) in send_indices.iter_mut().zip(local) {
                        *global = I::from_index(local.to_index().wrapping_add(offset));
                    }
                }
                Err(error) => call.local = Err(error),
            }
        }
        let ranks = comm.ranks();
        let (mut keys_in, mut indices_in) =
            (vec![zero; n * ranks], vec![I::from_index(0); n * ranks]);
        let mut status_in = vec![0u64; STATUS_WORDS * ranks];
        comm.grouped(token, self, &mut || {
            comm.all_gather(token, self, &send_keys[..], &mut keys_in[..])?;
            comm.all_gather(token, self, &send_indices[..], &mut indices_in[..])?;
            comm.all_gather(token, self, &call.status()[..], &mut status_in[..])
        })?;
        call.local?;
        if let Some(error) = peer_error(call.rank, &status_in) {
            return Ok(Outcome::ready((), Some(error)));
        }
        if !call.receives || exchange.written == 0 || exchange.rows == 0 {
            return Ok(Outcome::ready((), None));
        }
        let joined = exchange.rows * exchange.candidates;
        let (mut joined_keys, mut joined_indices) =
            (vec![zero; joined], vec![I::from_index(0); joined]);
        for (start, column, count) in exchange.joins() {
            for row in 0..exchange.rows {
                let from = start + row * exchange.slot;
                let to = row * exchange.candidates + column;
                joined_keys[to..to + count].copy_from_slice(&keys_in[from..from + count]);
                joined_indices[to..to + count].copy_from_slice(&indices_in[from..from + count]);
            }
        }
        let written = exchange.rows * exchange.written;
        let merge = strided(
            exchange.candidates,
            exchange.written,
            call.direction,
            exchange.rows,
            exchange.written,
        )?;
        stage(
            self,
            &merge,
            call.contract,
            &joined_keys[..],
            Some(&joined_indices[..]),
            &mut out_keys[..written],
            &mut out_indices[..written],
        )?
        .check()?;
        Ok(Outcome::ready((), None))
    }
}
