//! The streaming X-engine: voltage chunks in, int64 integrations out.
use super::Correlator;
use crate::error::Result;
use crate::streaming::{InputRing, Lanes, OutputRing, RegisteredHost};
use num_complex::Complex;

/// The streaming X-engine (Clark, La Plante & Greenhill, sec. 5, Algorithm 1), on the ring of
/// [`crate::streaming`]: the upload of chunk p + 1 (upload lane) overlaps the correlation of
/// chunk p (compute lane), which is added to a complex int64 accumulator, the device slot of
/// the output ring; a full integration is downloaded once (download lane) while the next one
/// accumulates in the next slot.
pub struct Integration<'c, 'g> {
    correlator: &'c Correlator<'g>,
    lanes: Lanes,
    input: InputRing<u8>,
    output: OutputRing<Complex<i64>>,
    /// Chunks per integration (0: until `finish`) and chunks in the current one.
    chunks_per_integration: usize,
    in_integration: usize,
}

impl<'c, 'g> Integration<'c, 'g> {
    /// An integration of `chunks_per_integration` chunks (0: until `finish`) with `depth`
    /// input and output slots ([`Correlator::streaming`]).
    pub(super) fn new(
        correlator: &'c Correlator<'g>,
        chunks_per_integration: usize,
        depth: usize,
    ) -> Result<Integration<'c, 'g>> {
        let (gpu, config) = (correlator.gpu(), correlator.config());
        Ok(Integration {
            correlator,
            lanes: Lanes::new(gpu)?,
            input: InputRing::new(gpu, depth, config.input_bytes())?,
            output: OutputRing::new(gpu, depth, config.output_len(), "correlator's integrations")?,
            chunks_per_integration,
            in_integration: 0,
        })
    }

    /// The pinned buffer for the next chunk (`input_bytes()` long): zeros at first, then the
    /// chunk last submitted from it. Waits only for the upload that last read it.
    pub fn input(&mut self) -> Result<&mut [u8]> {
        self.input.host_mut()
    }

    /// As [`input`](Self::input) (the name of earlier releases).
    pub fn buffer(&mut self) -> Result<&mut [u8]> {
        self.input()
    }

    /// Uploads the chunk in the current input slot and adds its correlation to the
    /// integration; enqueues the integration's download when it is complete.
    /// [`Error::Backlog`](crate::Error::Backlog) (nothing changed) when it would start an integration while every
    /// output slot holds one not yet taken.
    pub fn submit(&mut self) -> Result<()> {
        self.begin_chunk()?;
        self.input.upload(&self.lanes)?;
        self.correlate_uploaded()
    }

    /// As [`submit`](Self::submit), the chunk copied straight from `source` at element
    /// `offset` (registered host memory, e.g. a receive buffer; no host copy).
    pub fn submit_registered(&mut self, source: &RegisteredHost<'_, u8>, offset: usize) -> Result<()> {
        self.input.check_registered(source, offset)?;
        self.begin_chunk()?;
        self.input.upload_registered(&self.lanes, source, offset)?;
        self.correlate_uploaded()
    }

    /// Zeroes the next output slot when the chunk starts an integration.
    fn begin_chunk(&mut self) -> Result<()> {
        if self.in_integration == 0 {
            let accumulator = self.output.next_device()?;
            accumulator.poison_on(self.lanes.compute(), 0)?;
        }
        Ok(())
    }

    /// Correlates the chunk just uploaded into the accumulator (compute lane).
    fn correlate_uploaded(&mut self) -> Result<()> {
        let slot = (self.input.uploaded() - 1) % self.input.depth() as u64;
        let input = self.input.device(slot as usize);
        let accumulator = self.output.next_device()?;
        self.correlator.launch(input, accumulator, true, self.lanes.compute())?;
        self.in_integration += 1;
        if self.in_integration == self.chunks_per_integration {
            self.end_integration()?;
        }
        Ok(())
    }

    /// Ends the current integration now (enqueues its download), if it holds any chunk.
    pub fn end_integration(&mut self) -> Result<()> {
        if self.in_integration > 0 {
            self.output.download(&self.lanes)?;
            self.in_integration = 0;
        }
        Ok(())
    }

    /// The oldest complete integration not yet taken (complex int64, `output_len()` values),
    /// once downloaded; `None` when none is pending.
    pub fn output(&mut self) -> Result<Option<&[Complex<i64>]>> {
        self.output.take()
    }

    /// Integrations complete (enqueued) and not yet taken.
    pub fn pending(&self) -> usize {
        self.output.pending()
    }

    /// Chunks in the current integration.
    pub fn submitted(&self) -> usize {
        self.in_integration
    }

    /// Ends the current integration and returns it, and any earlier one not yet taken is
    /// dropped first; an integration of no chunks is all zeros.
    pub fn finish(&mut self) -> Result<Vec<Complex<i64>>> {
        if self.in_integration == 0 {
            while self.output.free() == 0 {
                self.output.take()?;
            }
            self.begin_chunk()?;
            self.output.download(&self.lanes)?;
        } else {
            self.end_integration()?;
        }
        while self.output.pending() > 1 {
            self.output.take()?;
        }
        Ok(self.output.take()?.map(<[_]>::to_vec).unwrap_or_default())
    }
}

impl crate::streaming::Engine for Integration<'_, '_> {
    fn submit(&mut self) -> Result<()> {
        Integration::submit(self)
    }
    fn skip_output(&mut self) -> Result<bool> {
        Ok(self.output.take()?.is_some())
    }
    fn pending(&self) -> usize {
        self.output.pending()
    }
    fn free_outputs(&self) -> usize {
        self.output.free()
    }
    fn flush(&mut self) -> Result<()> {
        self.end_integration()
    }
}
