//! The language of a page that does not declare it: whatlang's trigram detector over the
//! start of the extracted text, answered as an ISO 639-1 tag (`en`, `de`, …; the ISO 639-3
//! code for the few languages without one) and only when whatlang calls its guess reliable.
//!
//! Not here: reading the declared language (`<html lang>`, `Content-Language`: `web::extract`
//! and the fetch pool), which always wins over a guess. Script-only guesses (a short text, a
//! mix of languages) give `None`, not a wrong tag: the archive filters by `lang`, and a wrong
//! one hides a page where a missing one does not.

/// Characters of text read for the guess: whatlang is as sure after a couple of paragraphs
/// as after a whole page, and its cost grows with the text.
const SAMPLE_CHARS: usize = 2_000;

/// Fewest alphabetic characters in the sample for a guess at all: below it trigram counts are
/// noise (a title, a menu, a price).
const MIN_LETTERS: usize = 40;

/// `declared` when the page said what language it is in, else a guess from `text`.
pub fn or_detect(declared: Option<String>, text: &str) -> Option<String> {
    declared
        .filter(|lang| !lang.trim().is_empty())
        .or_else(|| detect(text))
}

/// The language `text` is written in, when a reliable guess can be made.
pub fn detect(text: &str) -> Option<String> {
    let end = text
        .char_indices()
        .nth(SAMPLE_CHARS)
        .map_or(text.len(), |(at, _)| at);
    let sample = &text[..end];
    if sample.chars().filter(|c| c.is_alphabetic()).count() < MIN_LETTERS {
        return None;
    }
    let info = whatlang::detect(sample).filter(whatlang::Info::is_reliable)?;
    let code = info.lang().code();
    Some(
        isolang::Language::from_639_3(code)
            .and_then(|lang| lang.to_639_1())
            .unwrap_or(code)
            .to_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guesses_common_languages_as_two_letter_tags() {
        let english = "The committee met on Tuesday to discuss the new budget for the city's \
                       public libraries, which have seen a sharp rise in visitors this year.";
        let german = "Der Ausschuss traf sich am Dienstag, um den neuen Haushalt für die \
                      öffentlichen Bibliotheken der Stadt zu besprechen, die in diesem Jahr \
                      deutlich mehr Besucher hatten.";
        let french = "Le comité s'est réuni mardi pour discuter du nouveau budget des \
                      bibliothèques publiques de la ville, qui ont accueilli beaucoup plus de \
                      visiteurs cette année.";
        assert_eq!(detect(english).as_deref(), Some("en"));
        assert_eq!(detect(german).as_deref(), Some("de"));
        assert_eq!(detect(french).as_deref(), Some("fr"));
    }

    #[test]
    fn no_guess_on_too_little_text_and_the_declared_tag_wins() {
        assert_eq!(detect("Home | Cart | 19.99 €"), None);
        assert_eq!(detect(""), None);
        let english = "The committee met on Tuesday to discuss the new budget for the city's \
                       public libraries, which have seen a sharp rise in visitors this year.";
        assert_eq!(
            or_detect(Some("en-GB".into()), english).as_deref(),
            Some("en-GB")
        );
        assert_eq!(or_detect(Some(" ".into()), english).as_deref(), Some("en"));
        assert_eq!(or_detect(None, english).as_deref(), Some("en"));
    }

    #[test]
    fn reads_only_the_start_of_a_long_text() {
        // A long page is guessed from its start; slicing on a character boundary past it.
        let french = "Le comité s'est réuni mardi pour discuter du nouveau budget des \
                      bibliothèques publiques de la ville, qui ont accueilli beaucoup plus de \
                      visiteurs cette année. ";
        let text = format!("{}{}", french.repeat(20), "ü".repeat(5_000));
        assert_eq!(detect(&text).as_deref(), Some("fr"));
    }
}
