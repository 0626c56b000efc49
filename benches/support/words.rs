//! Made-up text for the memory benches: a deterministic generator, a
//! vocabulary of invented words, and sentences skewed towards the common
//! ones, so that every run (and every store) is given the same text.

#![allow(dead_code)]

/// A small deterministic generator: the same run writes the same notes.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// A word index skewed towards the common ones, as in real text: the
    /// smaller of two draws.
    pub fn word(&mut self, vocabulary: usize) -> usize {
        self.below(vocabulary).min(self.below(vocabulary))
    }
}

/// `size` made-up words of two to four syllables.
pub fn vocabulary(size: usize) -> Vec<String> {
    const SYLLABLES: [&str; 32] = [
        "ka", "lo", "mi", "ter", "van", "du", "sel", "ro", "pan", "qui", "zo", "bre", "tal", "nu",
        "fen", "gor", "hil", "jas", "kel", "mor", "nes", "pol", "rin", "sto", "tur", "vel", "wen",
        "yar", "zed", "cam", "dor", "eth",
    ];
    let mut rng = Rng(0x5eed);
    let mut words = std::collections::BTreeSet::new();
    while words.len() < size {
        let parts = 2 + rng.below(3);
        let word: String = (0..parts).map(|_| SYLLABLES[rng.below(32)]).collect();
        words.insert(word);
    }
    words.into_iter().collect()
}

pub fn sentence(rng: &mut Rng, vocabulary: &[String], words: usize) -> String {
    (0..words)
        .map(|_| vocabulary[rng.word(vocabulary.len())].as_str())
        .collect::<Vec<_>>()
        .join(" ")
}
