//! Tables for people, as docker and kubectl print them: no borders, each
//! column as wide as its widest cell (comfy-table), ids cut to the tail
//! that tells them apart, times as ages. Scripts read `--json` instead,
//! which none of this touches.

use super::emit;

/// A table being filled; printed whole, so every column fits its content.
#[derive(Debug)]
pub struct Table {
    inner: comfy_table::Table,
    /// Columns whose cells are numbers, aligned right.
    numeric: Vec<usize>,
}

impl Table {
    pub fn new(header: &[&str]) -> Self {
        let mut inner = comfy_table::Table::new();
        inner
            .load_style(comfy_table::presets::NOTHING)
            .set_content_arrangement(comfy_table::ContentArrangement::Disabled)
            .set_header(header.to_vec());
        Self {
            inner,
            numeric: Vec::new(),
        }
    }

    /// Aligns these columns (by index) to the right.
    pub fn numeric(mut self, columns: &[usize]) -> Self {
        self.numeric = columns.to_vec();
        self
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.inner.add_row(cells);
    }

    /// Prints the header and every row, two spaces between columns.
    pub fn print(mut self) {
        for (i, column) in self.inner.column_iter_mut().enumerate() {
            column.set_padding((0, 2));
            if self.numeric.contains(&i) {
                column.set_cell_alignment(comfy_table::CellAlignment::Right);
            }
        }
        for line in self.inner.lines() {
            emit(line.trim_end());
        }
    }
}

/// The fewest characters of an id's tail shown: 6 of a ULID's random part
/// are 30 bits, so two ids made together almost never share them.
pub const MIN_TAIL: usize = 6;

/// How many characters of each id's tail tell all of `ids` apart (at
/// least [`MIN_TAIL`]). ULIDs made in the same millisecond share their
/// start, never (in practice) their end, so the tail is what differs.
pub fn tail_len<'a>(ids: impl IntoIterator<Item = &'a str> + Clone) -> usize {
    let longest = ids.clone().into_iter().map(str::len).max().unwrap_or(0);
    (MIN_TAIL..longest)
        .find(|&n| {
            let mut tails: Vec<&str> = ids.clone().into_iter().map(|id| tail(id, n)).collect();
            let all = tails.len();
            tails.sort_unstable();
            tails.dedup();
            tails.len() == all
        })
        .unwrap_or(longest)
}

/// The last `n` characters of `id` (ids are ASCII).
pub fn tail(id: &str, n: usize) -> &str {
    id.get(id.len().saturating_sub(n)..).unwrap_or(id)
}

/// How long ago `at_ms` was, as `3m ago`; `-` for no time.
pub fn age(at_ms: i64, now_ms: i64) -> String {
    if at_ms <= 0 {
        return "-".to_owned();
    }
    let secs = (now_ms - at_ms).max(0) / 1000;
    let (n, unit) = match secs {
        s if s < 60 => (s, "s"),
        s if s < 3600 => (s / 60, "m"),
        s if s < 86_400 => (s / 3600, "h"),
        s => (s / 86_400, "d"),
    };
    format!("{n}{unit} ago")
}

/// Now, in milliseconds since the epoch, for [`age`].
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tails_grow_until_they_tell_ids_apart() {
        let ids = [
            "agt_01AAAAAAAAAAAAAAAAAXA12345",
            "agt_01AAAAAAAAAAAAAAAAAYA12345",
        ];
        assert_eq!(tail_len(ids), 7);
        assert_eq!(tail(ids[0], 7), "XA12345");
        assert_eq!(tail_len(["agt_01ABCDEFGH", "agt_01ZZZZZZZZ"]), 6);
        assert_eq!(tail_len([] as [&str; 0]), 0);
    }

    #[test]
    fn ages_are_said_in_the_largest_whole_unit() {
        let now = 1_000_000_000;
        assert_eq!(age(now - 5_000, now), "5s ago");
        assert_eq!(age(now - 3 * 60_000 - 10, now), "3m ago");
        assert_eq!(age(now - 2 * 3_600_000, now), "2h ago");
        assert_eq!(age(now - 3 * 86_400_000, now), "3d ago");
        assert_eq!(age(0, now), "-");
        assert_eq!(age(now + 5_000, now), "0s ago");
    }
}
