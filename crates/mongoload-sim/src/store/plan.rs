//! How a collection answers a query: the plan (a range of the `_id` map or of
//! a secondary index, or a scan), the documents it selects, and the plan as
//! `explain` and the profiler's `planSummary` name it.

use super::*;

impl Collection {
    /// The documents matching `filter`, in `sort` order, after `skip`, at
    /// most `limit`. Uses the `_id` map or a secondary index when the filter
    /// constrains its leading field or the sort follows it.
    pub fn select(
        &self,
        filter: &Filter,
        sort: Option<&SortSpec>,
        skip: usize,
        limit: Option<usize>,
    ) -> Vec<&Document> {
        let want = limit.map(|l| l.saturating_add(skip));
        let mut out: Vec<&Document> = Vec::new();
        let plan = self.plan(filter, sort);
        let in_order = sort.is_none() || plan.sorted;
        // Stop early only when the output order is final.
        let stop_at = if in_order { want } else { None };
        fn push<'a>(
            filter: &Filter,
            stop_at: Option<usize>,
            doc: &'a Document,
            out: &mut Vec<&'a Document>,
        ) -> bool {
            if filter.matches(doc) {
                out.push(doc);
            }
            stop_at.is_none_or(|w| out.len() < w)
        }
        match plan.source {
            Source::Primary(intervals) => {
                let mut seen = BTreeSet::new();
                let dedup = intervals.len() > 1;
                'outer: for iv in &intervals {
                    let docs: Box<dyn Iterator<Item = (&Key, &Document)>> = if plan.reverse {
                        Box::new(primary_range_rev(&self.docs, iv.clone()))
                    } else {
                        Box::new(primary_range(&self.docs, iv.clone()))
                    };
                    for (k, d) in docs {
                        if dedup && !seen.insert(k) {
                            continue;
                        }
                        if !push(filter, stop_at, d, &mut out) {
                            break 'outer;
                        }
                    }
                }
            }
            Source::Index(i, intervals) => {
                let ix = &self.indexes[i];
                let mut seen = BTreeSet::new();
                let dedup = intervals.len() > 1 || ix.multikey;
                'outer2: for iv in &intervals {
                    let ids: Box<dyn Iterator<Item = &BTreeSet<Key>>> = if plan.reverse {
                        Box::new(index_range_rev(&ix.entries, iv.clone(), ix.key.len()))
                    } else {
                        Box::new(index_range(&ix.entries, iv.clone()))
                    };
                    for set in ids {
                        for id in set {
                            if dedup && !seen.insert(id) {
                                continue;
                            }
                            if let Some(d) = self.docs.get(id) {
                                if !push(filter, stop_at, d, &mut out) {
                                    break 'outer2;
                                }
                            }
                        }
                    }
                }
            }
        }
        if let (Some(s), false) = (sort, in_order) {
            out.sort_by(|a, b| s.compare(a, b));
        }
        let end = want.unwrap_or(usize::MAX).min(out.len());
        if skip >= end {
            return Vec::new();
        }
        out.truncate(end);
        out.drain(..skip);
        out
    }

    /// How [`Collection::select`] would answer: `IDSCAN`, `IXSCAN <name>`
    /// or `COLLSCAN`, with ` SORTED` when the source yields the sort order
    /// (no in-memory sort, early stop at the limit).
    pub fn explain(&self, filter: &Filter, sort: Option<&SortSpec>) -> String {
        let plan = self.plan(filter, sort);
        let full = |ivs: &[Interval]| {
            ivs.len() == 1 && ivs[0].lower == Bound::Unbounded && ivs[0].upper == Bound::Unbounded
        };
        let mut s = match &plan.source {
            Source::Primary(ivs) if full(ivs) && !plan.sorted => "COLLSCAN".to_owned(),
            Source::Primary(_) => "IDSCAN".to_owned(),
            Source::Index(i, _) => format!("IXSCAN {}", self.indexes[*i].name),
        };
        if plan.sorted && sort.is_some() {
            s.push_str(" SORTED");
        }
        s
    }

    /// The plan as mongod's `planSummary` names it (`COLLSCAN`, `IDHACK`,
    /// `IXSCAN { a: 1, b: -1 }`), and whether it reads every document (a
    /// collection scan: the profiler's `docsExamined` is then the size).
    pub fn plan_summary(&self, filter: &Filter, sort: Option<&SortSpec>) -> (String, bool) {
        let plan = self.plan(filter, sort);
        let full = |ivs: &[Interval]| {
            ivs.len() == 1 && ivs[0].lower == Bound::Unbounded && ivs[0].upper == Bound::Unbounded
        };
        match &plan.source {
            Source::Primary(ivs) if full(ivs) && !plan.sorted => ("COLLSCAN".to_owned(), true),
            Source::Primary(ivs) if full(ivs) => ("IXSCAN { _id: 1 }".to_owned(), true),
            Source::Primary(_) => ("IDHACK".to_owned(), false),
            Source::Index(i, _) => {
                let fields: Vec<String> = self.indexes[*i]
                    .key
                    .iter()
                    .map(|(f, d)| format!("{f}: {}", key_direction(*d)))
                    .collect();
                (format!("IXSCAN {{ {} }}", fields.join(", ")), false)
            }
        }
    }

    /// The plan as `explain` shows it: its stages as MongoDB 7.0's
    /// classic engine names them.
    pub fn winning_plan(&self, filter: &Filter, sort: Option<&SortSpec>) -> WinningPlan {
        let plan = self.plan(filter, sort);
        let full = |ivs: &[Interval]| {
            ivs.len() == 1 && ivs[0].lower == Bound::Unbounded && ivs[0].upper == Bound::Unbounded
        };
        match &plan.source {
            Source::Primary(ivs) if full(ivs) && !plan.sorted => WinningPlan::CollScan,
            Source::Primary(ivs) if full(ivs) => WinningPlan::IndexScan {
                name: "_id_".into(),
                key: vec![("_id".into(), 1)],
            },
            Source::Primary(ivs) if ivs.len() == 1 && ivs[0].lower == ivs[0].upper => {
                WinningPlan::IdHack
            }
            Source::Primary(_) => WinningPlan::IndexScan {
                name: "_id_".into(),
                key: vec![("_id".into(), 1)],
            },
            Source::Index(i, _) => WinningPlan::IndexScan {
                name: self.indexes[*i].name.clone(),
                key: self.indexes[*i].key.clone(),
            },
        }
    }

    fn plan(&self, filter: &Filter, sort: Option<&SortSpec>) -> Plan {
        let all = || {
            vec![Interval {
                lower: Bound::Unbounded,
                upper: Bound::Unbounded,
            }]
        };
        let id_sort = sort.and_then(|s| sort_direction(&[("_id".to_owned(), 1)], s.fields()));
        if let Some(ivs) = filter.intervals("_id") {
            let single = ivs.len() == 1;
            return Plan {
                sorted: single && id_sort.is_some(),
                reverse: single && id_sort == Some(true),
                source: Source::Primary(ivs),
            };
        }
        let mut best: Option<(i32, Plan)> = None;
        for (i, ix) in self
            .indexes
            .iter()
            .enumerate()
            .filter(|(_, ix)| ix.complete())
        {
            let dir = sort.and_then(|s| ix.sort_direction(s));
            let Some(ivs) = filter.intervals(&ix.key[0].0) else {
                continue;
            };
            let points = ivs.iter().all(|iv| matches!((&iv.lower, &iv.upper), (Bound::Included(a), Bound::Included(b)) if compare(a, b) == Ordering::Equal));
            let ivs = match ix.key[0].1 {
                HASHED if !points => continue,
                HASHED => hashed_points(&ivs),
                _ => ivs,
            };
            let single = ivs.len() == 1;
            let score = 2 * i32::from(points)
                + i32::from(ix.options.unique)
                + 2 * i32::from(single && dir.is_some());
            if best.as_ref().is_none_or(|(s, _)| score > *s) {
                let sorted = single && dir.is_some();
                best = Some((
                    score,
                    Plan {
                        sorted,
                        reverse: sorted && dir == Some(true),
                        source: Source::Index(i, ivs),
                    },
                ));
            }
        }
        if let Some((_, plan)) = best {
            return plan;
        }
        if let Some(rev) = id_sort {
            return Plan {
                sorted: true,
                reverse: rev,
                source: Source::Primary(all()),
            };
        }
        if let Some(s) = sort {
            for (i, ix) in self
                .indexes
                .iter()
                .enumerate()
                .filter(|(_, ix)| ix.complete())
            {
                if let Some(rev) = ix.sort_direction(s) {
                    return Plan {
                        sorted: true,
                        reverse: rev,
                        source: Source::Index(i, all()),
                    };
                }
            }
        }
        Plan {
            sorted: false,
            reverse: false,
            source: Source::Primary(all()),
        }
    }
}

/// Point intervals as a hashed index holds them: each value's hash,
/// sorted and without repeats.
fn hashed_points(points: &[Interval]) -> Vec<Interval> {
    let mut hashes: Vec<i64> = points
        .iter()
        .filter_map(|iv| match &iv.lower {
            Bound::Included(v) => Some(hash(v)),
            _ => None,
        })
        .collect();
    hashes.sort_unstable();
    hashes.dedup();
    hashes
        .into_iter()
        .map(|h| Interval {
            lower: Bound::Included(Bson::Int64(h)),
            upper: Bound::Included(Bson::Int64(h)),
        })
        .collect()
}

fn below_upper(v: &Bson, upper: &Bound) -> bool {
    match upper {
        Bound::Unbounded => true,
        Bound::Included(u) => compare(v, u) != Ordering::Greater,
        Bound::Excluded(u) => compare(v, u) == Ordering::Less,
    }
}

fn above_lower(v: &Bson, lower: &Bound) -> bool {
    match lower {
        Bound::Unbounded => true,
        Bound::Included(l) => compare(v, l) != Ordering::Less,
        Bound::Excluded(l) => compare(v, l) == Ordering::Greater,
    }
}

// Ranges start from one bound (as an inclusive std bound, which can never
// make BTreeMap::range panic) and stop with take_while at the other.
fn primary_range(
    docs: &BTreeMap<Key, Document>,
    iv: Interval,
) -> impl Iterator<Item = (&Key, &Document)> {
    let start = match &iv.lower {
        Bound::Unbounded => StdBound::Unbounded,
        Bound::Included(v) | Bound::Excluded(v) => StdBound::Included(Key(v.clone())),
    };
    docs.range((start, StdBound::Unbounded))
        .skip_while({
            let l = iv.lower.clone();
            move |(k, _)| !above_lower(&k.0, &l)
        })
        .take_while(move |(k, _)| below_upper(&k.0, &iv.upper))
}

fn primary_range_rev(
    docs: &BTreeMap<Key, Document>,
    iv: Interval,
) -> impl Iterator<Item = (&Key, &Document)> {
    let end = match &iv.upper {
        Bound::Unbounded => StdBound::Unbounded,
        Bound::Included(v) | Bound::Excluded(v) => StdBound::Included(Key(v.clone())),
    };
    docs.range((StdBound::Unbounded, end))
        .rev()
        .skip_while({
            let u = iv.upper.clone();
            move |(k, _)| !below_upper(&k.0, &u)
        })
        .take_while(move |(k, _)| above_lower(&k.0, &iv.lower))
}

fn index_range(
    entries: &BTreeMap<Vec<Key>, BTreeSet<Key>>,
    iv: Interval,
) -> impl Iterator<Item = &BTreeSet<Key>> {
    let start = match &iv.lower {
        Bound::Unbounded => StdBound::Unbounded,
        // [v] sorts before every [v, ...].
        Bound::Included(v) | Bound::Excluded(v) => StdBound::Included(vec![Key(v.clone())]),
    };
    entries
        .range((start, StdBound::Unbounded))
        .skip_while({
            let l = iv.lower.clone();
            move |(k, _)| !above_lower(&k[0].0, &l)
        })
        .take_while(move |(k, _)| below_upper(&k[0].0, &iv.upper))
        .map(|(_, ids)| ids)
}

fn index_range_rev(
    entries: &BTreeMap<Vec<Key>, BTreeSet<Key>>,
    iv: Interval,
    width: usize,
) -> impl Iterator<Item = &BTreeSet<Key>> {
    let end = match &iv.upper {
        Bound::Unbounded => StdBound::Unbounded,
        // [v, MaxKey, ...] sorts after every [v, ...].
        Bound::Included(v) | Bound::Excluded(v) => {
            let mut k = vec![Key(v.clone())];
            k.resize(width.max(1), Key(Bson::MaxKey));
            StdBound::Included(k)
        }
    };
    entries
        .range((StdBound::Unbounded, end))
        .rev()
        .skip_while({
            let u = iv.upper.clone();
            move |(k, _)| !below_upper(&k[0].0, &u)
        })
        .take_while(move |(k, _)| above_lower(&k[0].0, &iv.lower))
        .map(|(_, ids)| ids)
}

struct Plan {
    /// The source yields documents in the requested sort order.
    sorted: bool,
    reverse: bool,
    source: Source,
}

enum Source {
    Primary(Vec<Interval>),
    Index(usize, Vec<Interval>),
}
