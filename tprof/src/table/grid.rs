//! Tables drawn as comfy-table draws its `UTF8_FULL_CONDENSED` preset, byte for byte, into
//! one buffer: the rich report draws a table per process, and comfy-table's allocations per
//! cell and per line took most of a report of 100,000 processes. The public tables
//! ([`process_summary`](super::process_summary), [`function_table`](super::function_table))
//! are still comfy-table's, built from the same cells ([`Grid::to_table`]).

use comfy_table::{CellAlignment, Table};
use unicode_width::UnicodeWidthStr;

/// A table's header and cells, as text laid out one after another.
#[derive(Debug)]
pub(crate) struct Grid<'h> {
    header: Vec<&'h str>,
    /// Per column: right-aligned (else left).
    right: Vec<bool>,
    /// Per column: the widest cell's width, header included.
    widths: Vec<usize>,
    /// Every cell's text, row after row.
    text: String,
    /// Where each cell of `text` ends.
    ends: Vec<usize>,
}

impl<'h> Grid<'h> {
    /// A table of `header`'s columns, the first left-aligned and the others right-aligned.
    pub(crate) fn new(header: Vec<&'h str>) -> Grid<'h> {
        let right = (0..header.len()).map(|i| i > 0).collect();
        let widths = header.iter().map(|h| h.width()).collect();
        Grid {
            header,
            right,
            widths,
            text: String::new(),
            ends: Vec::new(),
        }
    }

    /// Aligns column `column` to the left.
    pub(crate) fn left(&mut self, column: usize) {
        if let Some(right) = self.right.get_mut(column) {
            *right = false;
        }
    }

    /// The text the next cell is written onto; [`Grid::end_cell`] ends it.
    pub(crate) fn text(&mut self) -> &mut String {
        &mut self.text
    }

    /// Ends the cell written since the last one ended.
    pub(crate) fn end_cell(&mut self) {
        let start = self.ends.last().copied().unwrap_or(0);
        let column = self.ends.len() % self.header.len().max(1);
        let width = self.text[start..].width();
        if let Some(w) = self.widths.get_mut(column) {
            *w = (*w).max(width);
        }
        self.ends.push(self.text.len());
    }

    /// A cell of `content`.
    pub(crate) fn cell(&mut self, content: &str) {
        self.text.push_str(content);
        self.end_cell();
    }

    /// The cells, row by row.
    fn rows(&self) -> impl Iterator<Item = impl Iterator<Item = &str>> {
        let columns = self.header.len().max(1);
        self.ends.chunks(columns).enumerate().map(move |(r, row)| {
            let start = r
                .checked_mul(columns)
                .and_then(|first| first.checked_sub(1))
                .map_or(0, |before| self.ends[before]);
            row.iter().scan(start, move |at, &end| {
                let cell = &self.text[*at..end];
                *at = end;
                Some(cell)
            })
        })
    }

    /// The table as comfy-table's, with the same cells and alignment.
    pub(crate) fn to_table(&self) -> Table {
        let mut table = Table::new();
        table.load_style(comfy_table::presets::UTF8_FULL_CONDENSED);
        table.set_header(self.header.iter().copied());
        for (i, &right) in self.right.iter().enumerate() {
            if let Some(column) = table.column_mut(i) {
                column.set_cell_alignment(if right {
                    CellAlignment::Right
                } else {
                    CellAlignment::Left
                });
            }
        }
        for row in self.rows() {
            table.add_row(row);
        }
        table
    }

    /// A border line: `left`, each column's width (and its padding) of `fill`, `junction`
    /// between them, `right`.
    fn border(&self, out: &mut String, [left, fill, junction, right]: [char; 4]) {
        out.push(left);
        for (i, &w) in self.widths.iter().enumerate() {
            if i > 0 {
                out.push(junction);
            }
            out.extend(std::iter::repeat_n(fill, w + 2));
        }
        out.push(right);
        out.push('\n');
    }

    /// A line of cells, each padded to its column's width as the column aligns it.
    fn line<'c>(&self, out: &mut String, cells: impl Iterator<Item = &'c str>) {
        out.push('│');
        for (i, cell) in cells.enumerate() {
            if i > 0 {
                out.push('┆');
            }
            let spaces = self.widths[i].saturating_sub(cell.width());
            out.push(' ');
            if self.right[i] {
                crate::format::pad(out, spaces);
                out.push_str(cell);
            } else {
                out.push_str(cell);
                crate::format::pad(out, spaces);
            }
            out.push(' ');
        }
        out.push_str("│\n");
    }

    /// Draws the table onto `out` as comfy-table's `Display` does (no newline after the last
    /// line).
    pub(crate) fn draw(&self, out: &mut String) {
        self.border(out, ['┌', '─', '┬', '┐']);
        self.line(out, self.header.iter().copied());
        self.border(out, ['╞', '═', '╪', '╡']);
        for row in self.rows() {
            self.line(out, row);
        }
        self.border(out, ['└', '─', '┴', '┘']);
        out.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::Grid;

    fn grid(header: Vec<&'static str>, rows: &[&[&str]], left: &[usize]) -> Grid<'static> {
        let mut grid = Grid::new(header);
        for &l in left {
            grid.left(l);
        }
        for row in rows {
            for cell in *row {
                grid.cell(cell);
            }
        }
        grid
    }

    #[test]
    fn a_grid_draws_as_comfy_table_draws_it() {
        let cases = [
            grid(vec!["function", "calls", "%"], &[], &[]),
            grid(
                vec!["function", "calls", "%"],
                &[&["app::main/0", "1", "100.00"], &["a", "123456789", "0.5"]],
                &[],
            ),
            grid(
                vec!["process", "name", "initial call", "calls"],
                &[
                    &["<0.1.0>", "wörker", "app::日本/0", "7"],
                    &["<0.2.0>", "-", "", "12"],
                    &["<0.3.0>", "🦀 crab", "-", ""],
                ],
                &[1, 2],
            ),
            grid(vec!["x"], &[&[""], &["long cell"]], &[]),
        ];
        for grid in cases {
            let mut drawn = String::new();
            grid.draw(&mut drawn);
            assert_eq!(drawn, grid.to_table().to_string());
        }
    }
}
