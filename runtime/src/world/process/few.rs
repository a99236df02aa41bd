//! [`Few`]: a list that keeps its first element inline.
//!
//! Most processes have at most one link and at most one monitor on them (the spawner's), so a
//! process's links and the monitors on it hold their first entry without allocating, and
//! spawn+exit of a monitored or linked process costs no allocation for them.

/// A list that holds one element inline and spills to a boxed `Vec` from the second on (boxed,
/// so that `Few<Pid>` takes 16 bytes where a `Vec` takes 24). Order is not kept across
/// removals (as `Vec::swap_remove`).
#[derive(Clone, Debug, Default)]
pub(crate) enum Few<T> {
    #[default]
    Zero,
    One(T),
    /// Kept once allocated, even when emptied, to be reused. Boxed: a thin pointer keeps the
    /// list small, and a second entry is rare.
    #[allow(clippy::box_collection)]
    Many(Box<Vec<T>>),
}

impl<T> Few<T> {
    /// The elements, in order.
    #[inline]
    pub(crate) fn as_slice(&self) -> &[T] {
        match self {
            Few::Zero => &[],
            Few::One(x) => std::slice::from_ref(x),
            Few::Many(v) => v,
        }
    }

    #[inline]
    pub(crate) fn push(&mut self, x: T) {
        match self {
            Few::Zero => *self = Few::One(x),
            Few::Many(v) => v.push(x),
            Few::One(_) => {
                let Few::One(first) = std::mem::take(self) else {
                    unreachable!("matched One")
                };
                *self = Few::Many(Box::new(vec![first, x]));
            }
        }
    }

    /// Removes and returns the first element for which `pred` holds (the last one takes its
    /// place).
    pub(crate) fn swap_remove_where(&mut self, mut pred: impl FnMut(&T) -> bool) -> Option<T> {
        match self {
            Few::Zero => None,
            Few::One(x) => {
                if !pred(x) {
                    return None;
                }
                match std::mem::take(self) {
                    Few::One(x) => Some(x),
                    _ => unreachable!("matched One"),
                }
            }
            Few::Many(v) => {
                let i = v.iter().position(pred)?;
                Some(v.swap_remove(i))
            }
        }
    }

    /// Keeps only the elements for which `keep` holds.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        match self {
            Few::Zero => {}
            Few::One(x) => {
                if !keep(x) {
                    *self = Few::Zero;
                }
            }
            Few::Many(v) => v.retain(keep),
        }
    }
}

impl<T> IntoIterator for Few<T> {
    type Item = T;
    type IntoIter = IntoIter<T>;

    #[inline]
    fn into_iter(self) -> IntoIter<T> {
        match self {
            Few::Zero => IntoIter::One(None),
            Few::One(x) => IntoIter::One(Some(x)),
            Few::Many(v) => IntoIter::Many(v.into_iter()),
        }
    }
}

/// The elements of a [`Few`], by value: an empty or one-element list is walked with no vector
/// made, checked or dropped (an exit walks its links and its monitors so, most often none or
/// one of each).
pub(crate) enum IntoIter<T> {
    /// No element left, or the one inline.
    One(Option<T>),
    /// Those of a list that grew past one.
    Many(std::vec::IntoIter<T>),
}

impl<T> Iterator for IntoIter<T> {
    type Item = T;

    #[inline]
    fn next(&mut self) -> Option<T> {
        match self {
            IntoIter::One(x) => x.take(),
            IntoIter::Many(v) => v.next(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Few;

    fn sorted(f: &Few<u32>) -> Vec<u32> {
        let mut v = f.as_slice().to_vec();
        v.sort_unstable();
        v
    }

    #[test]
    fn holds_one_inline_then_spills() {
        let mut f = Few::default();
        assert!(f.as_slice().is_empty());
        f.push(1);
        assert!(matches!(f, Few::One(1)));
        f.push(2);
        f.push(3);
        assert_eq!(sorted(&f), [1, 2, 3]);
        assert_eq!(f.swap_remove_where(|x| *x == 2), Some(2));
        assert_eq!(f.swap_remove_where(|x| *x == 2), None);
        assert_eq!(sorted(&f), [1, 3]);
        f.retain(|x| *x != 1);
        assert_eq!(f.as_slice(), [3]);
        assert_eq!(f.clone().into_iter().collect::<Vec<_>>(), [3]);
    }

    #[test]
    fn a_list_of_pids_is_smaller_than_a_vec() {
        assert_eq!(std::mem::size_of::<Few<crate::Pid>>(), 16);
        assert!(std::mem::size_of::<Few<crate::Pid>>() < std::mem::size_of::<Vec<crate::Pid>>());
    }

    #[test]
    fn removes_its_inline_element() {
        let mut f = Few::default();
        f.push(7);
        assert_eq!(f.swap_remove_where(|x| *x == 8), None);
        assert_eq!(f.swap_remove_where(|x| *x == 7), Some(7));
        assert!(matches!(f, Few::Zero));
        f.push(9);
        f.retain(|_| false);
        assert!(matches!(f, Few::Zero));
        assert_eq!(f.into_iter().count(), 0);
        let mut g = Few::default();
        g.push(1);
        assert_eq!(g.into_iter().collect::<Vec<_>>(), [1]);
    }

    /// Walked by value, a list gives each element once: none, the inline one, or all of a
    /// spilled list, and a walk left halfway drops the rest.
    #[test]
    fn walks_each_element_once() {
        assert_eq!(Few::<u32>::Zero.into_iter().next(), None);
        let mut f = Few::default();
        f.push(1);
        let mut walk = f.clone().into_iter();
        assert_eq!((walk.next(), walk.next()), (Some(1), None));
        f.push(2);
        f.push(3);
        assert_eq!(f.clone().into_iter().collect::<Vec<_>>(), [1, 2, 3]);
        let held = std::sync::Arc::new(());
        let mut shared = Few::default();
        for _ in 0..3 {
            shared.push(std::sync::Arc::clone(&held));
        }
        let mut walk = shared.into_iter();
        drop(walk.next());
        drop(walk);
        assert_eq!(std::sync::Arc::strong_count(&held), 1);
    }
}
