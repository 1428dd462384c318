//! Launchers and engines borrow their GPU (`Correlator<'g>` holds `&'g Gpu`) and engines
//! borrow their launcher (`Integration<'c, 'g>`); a Python object cannot carry a borrow, so
//! each keeps what it borrows from alive in an `Arc` next to it ([`Tied`]).
use std::sync::{Arc, Mutex, MutexGuard};

/// A `value` that borrows from `owner`, kept together with it. Fields drop in declaration
/// order, so `value` (the borrower) is dropped before the `Arc` that may free its owner.
pub struct Tied<O: 'static, T> {
    value: T,
    owner: Arc<O>,
}

impl<O: 'static, T> Tied<O, T> {
    /// Builds the borrower from a reference to the owner that `make` may treat as `'static`.
    ///
    /// # Safety
    ///
    /// `make` may put the reference only into its result (not into a global, a thread, or
    /// another object): the owner lives exactly as long as the result, which this `Tied`
    /// keeps; `Arc` never moves the owner, so the reference stays valid.
    pub unsafe fn new<E>(owner: Arc<O>, make: impl FnOnce(&'static O) -> Result<T, E>) -> Result<Self, E> {
        // SAFETY: the `Arc`'s allocation outlives `value` (field order above) and does not
        // move; the caller keeps the reference inside `value`.
        let owner_ref: &'static O = unsafe { &*Arc::as_ptr(&owner) };
        Ok(Tied { value: make(owner_ref)?, owner })
    }

    /// The borrower.
    pub fn get(&self) -> &T {
        &self.value
    }

    /// The borrower, mutable.
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.value
    }

    /// The owner.
    pub fn owner(&self) -> &Arc<O> {
        &self.owner
    }
}

/// Locks `mutex`, taking over a lock poisoned by a panic in another thread: every value the
/// binding keeps behind a lock (launchers, engines, dither states) records its own broken
/// state, so the data stays usable and the next call reports any failure as an exception.
pub fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
