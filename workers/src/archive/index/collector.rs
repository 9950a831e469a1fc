//! The collector behind a search: the best chunks by score among those that pass the search's
//! filters (host, fetch dates, latest or as-of version), checked on fast fields while
//! collecting, with tantivy's block-max WAND pruning kept.
//!
//! Not here: parsing the query, the per-page collapse or reading stored documents (`search`).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use tantivy::collector::{Collector, SegmentCollector};
use tantivy::columnar::Column;
use tantivy::query::Weight;
use tantivy::{DateTime, DocAddress, DocId, Score, SegmentReader};

use super::FAR_FUTURE;
use super::schema::{FETCHED_AT, HOST, VALID_UNTIL};

/// Search filters, checked on fast fields while collecting (times in microseconds).
///
/// Filters are not query clauses: a conjunction with them would keep tantivy from pruning with
/// block-max WAND, and scoring every match of a common word in a million chunks is too slow.
#[derive(Debug, Clone)]
pub(super) struct Filter {
    pub(super) host: Option<String>,
    pub(super) after: Option<i64>,
    pub(super) before: Option<i64>,
    pub(super) as_of: Option<i64>,
}

/// The best `limit` documents by score among those passing `filter`, best first (ties: lower
/// address first). Collects with `Weight::for_each_pruning`, so unions of terms are pruned
/// with block-max WAND against the filtered top's threshold.
pub(super) struct FilteredTop {
    pub(super) limit: usize,
    pub(super) filter: Filter,
}

impl Collector for FilteredTop {
    type Fruit = Vec<(Score, DocAddress)>;
    type Child = FilteredTopSegment;

    fn for_segment(
        &self,
        segment_ord: u32,
        reader: &SegmentReader,
    ) -> tantivy::Result<Self::Child> {
        Ok(FilteredTopSegment {
            segment_ord,
            filter: SegmentFilter::new(&self.filter, reader)?,
            top: BinaryHeap::with_capacity(self.limit + 1),
            limit: self.limit,
        })
    }

    fn requires_scoring(&self) -> bool {
        true
    }

    fn merge_fruits(&self, fruits: Vec<Self::Fruit>) -> tantivy::Result<Self::Fruit> {
        let mut all: Vec<(Score, DocAddress)> = fruits.into_iter().flatten().collect();
        all.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        all.truncate(self.limit);
        Ok(all)
    }

    fn collect_segment(
        &self,
        weight: &dyn Weight,
        segment_ord: u32,
        reader: &SegmentReader,
    ) -> tantivy::Result<Self::Fruit> {
        let mut segment = self.for_segment(segment_ord, reader)?;
        if segment.filter.is_none() {
            return Ok(Vec::new());
        }
        let alive = reader.alive_bitset();
        let mut threshold = Score::MIN;
        weight.for_each_pruning(Score::MIN, reader, &mut |doc, score| {
            if !alive.is_some_and(|a| a.is_deleted(doc)) {
                segment.collect(doc, score);
                threshold = segment.threshold();
            }
            threshold
        })?;
        Ok(segment.harvest())
    }
}

/// A (score, doc) ordered by score, then lower doc first; in a `Reverse` heap the root is the
/// worst kept.
#[derive(Debug, Clone, Copy)]
struct Scored(Score, DocId);

impl PartialEq for Scored {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}

impl Eq for Scored {}

impl PartialOrd for Scored {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Scored {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0).then(other.1.cmp(&self.1))
    }
}

pub(super) struct FilteredTopSegment {
    segment_ord: u32,
    /// `None`: no document of this segment can pass.
    filter: Option<SegmentFilter>,
    top: BinaryHeap<Reverse<Scored>>,
    limit: usize,
}

impl FilteredTopSegment {
    /// Scores at or below this cannot enter the top any more.
    fn threshold(&self) -> Score {
        match self.top.peek() {
            Some(Reverse(worst)) if self.top.len() >= self.limit => worst.0,
            _ => Score::MIN,
        }
    }
}

impl SegmentCollector for FilteredTopSegment {
    type Fruit = Vec<(Score, DocAddress)>;

    fn collect(&mut self, doc: DocId, score: Score) {
        if !self.filter.as_ref().is_some_and(|f| f.matches(doc)) {
            return;
        }
        let scored = Scored(score, doc);
        if self.top.len() < self.limit {
            self.top.push(Reverse(scored));
        } else if self
            .top
            .peek()
            .is_some_and(|Reverse(worst)| scored > *worst)
        {
            self.top.pop();
            self.top.push(Reverse(scored));
        }
    }

    fn harvest(self) -> Self::Fruit {
        let segment_ord = self.segment_ord;
        self.top
            .into_sorted_vec()
            .into_iter()
            .map(|Reverse(Scored(score, doc))| (score, DocAddress::new(segment_ord, doc)))
            .collect()
    }
}

/// [`Filter`] bound to one segment's fast-field columns.
struct SegmentFilter {
    /// Term-ordinal column of `host`, and the wanted host's ordinal in this segment.
    host: Option<(Column<u64>, u64)>,
    fetched_at: Column<DateTime>,
    valid_until: Column<DateTime>,
    after: Option<i64>,
    before: Option<i64>,
    as_of: Option<i64>,
}

impl SegmentFilter {
    /// `None` when no document of the segment can pass (the host does not occur in it).
    fn new(filter: &Filter, reader: &SegmentReader) -> tantivy::Result<Option<Self>> {
        let fast = reader.fast_fields();
        let host = match &filter.host {
            None => None,
            Some(host) => {
                let Some(column) = fast.str(HOST)? else {
                    return Ok(None);
                };
                let Some(ord) = column.dictionary().term_ord(host)? else {
                    return Ok(None);
                };
                Some((column.ords().clone(), ord))
            }
        };
        Ok(Some(SegmentFilter {
            host,
            fetched_at: fast.date(FETCHED_AT)?,
            valid_until: fast.date(VALID_UNTIL)?,
            after: filter.after,
            before: filter.before,
            as_of: filter.as_of,
        }))
    }

    fn matches(&self, doc: DocId) -> bool {
        if let Some((column, ord)) = &self.host
            && column.first(doc) != Some(*ord)
        {
            return false;
        }
        let micros =
            |column: &Column<DateTime>| column.first(doc).map(|d| d.into_timestamp_micros());
        let valid_until = micros(&self.valid_until).unwrap_or(FAR_FUTURE);
        match self.as_of {
            None if valid_until < FAR_FUTURE => return false,
            None => {}
            Some(at) if valid_until <= at => return false,
            Some(_) => {}
        }
        if self.after.is_none() && self.before.is_none() && self.as_of.is_none() {
            return true;
        }
        let Some(fetched_at) = micros(&self.fetched_at) else {
            return false;
        };
        self.as_of.is_none_or(|at| fetched_at <= at)
            && self.after.is_none_or(|t| fetched_at >= t)
            && self.before.is_none_or(|t| fetched_at < t)
    }
}
