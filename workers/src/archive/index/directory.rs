//! The index's directory: tantivy's `MmapDirectory`, except that document stores (`.store`
//! files: the stored fields, about 60 % of the index's bytes) and positions (`.pos`, about
//! 30 %) are read with positioned reads into buffers instead of through a memory mapping.
//!
//! Why: a merge copies every input segment's whole store and every term's positions. Read
//! through the mapping, those pages stayed in the process's resident memory until the merge
//! ended and its inputs were dropped, which made the archive pool's RSS peaks (a merge of a
//! tenth of the crawl bench's index mapped about 120 MB at once). Read into buffers, each
//! piece is freed once it is copied. Searches read one compressed store block at a time
//! (tantivy caches decompressed blocks), a `pread` each, and a term's positions only for
//! phrase queries. Every other file (term dictionaries, postings, fast fields, field norms) is
//! still mapped: searches read them in many small pieces, where the mapping costs nothing.
//!
//! Not here: what the index holds (`schema`, `writer`).

use std::fs::File;
use std::io;
use std::ops::Range;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tantivy::HasLen;
use tantivy::directory::error::{DeleteError, LockError, OpenReadError, OpenWriteError};
use tantivy::directory::{
    Directory, DirectoryLock, FileHandle, Lock, MmapDirectory, OwnedBytes, WatchCallback,
    WatchHandle, WritePtr,
};

/// `MmapDirectory` with document stores and positions read into buffers.
#[derive(Debug, Clone)]
pub(super) struct IndexDirectory {
    root: PathBuf,
    mmap: MmapDirectory,
}

impl IndexDirectory {
    /// The directory at `root`, which must exist.
    pub(super) fn open(root: &Path) -> tantivy::Result<IndexDirectory> {
        Ok(IndexDirectory {
            root: root.to_path_buf(),
            mmap: MmapDirectory::open(root)?,
        })
    }
}

/// Whether `path` is read into buffers: a segment's document store or positions.
fn is_read(path: &Path) -> bool {
    path.extension()
        .is_some_and(|extension| extension == "store" || extension == "pos")
}

impl Directory for IndexDirectory {
    fn get_file_handle(&self, path: &Path) -> Result<Arc<dyn FileHandle>, OpenReadError> {
        if !is_read(path) {
            return self.mmap.get_file_handle(path);
        }
        let opened = File::open(self.root.join(path)).and_then(|file| {
            let len = usize::try_from(file.metadata()?.len()).map_err(io::Error::other)?;
            Ok(ReadFile { file, len })
        });
        match opened {
            Ok(handle) => Ok(Arc::new(handle)),
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                Err(OpenReadError::FileDoesNotExist(path.to_path_buf()))
            }
            Err(error) => Err(OpenReadError::wrap_io_error(error, path.to_path_buf())),
        }
    }

    fn delete(&self, path: &Path) -> Result<(), DeleteError> {
        self.mmap.delete(path)
    }

    fn exists(&self, path: &Path) -> Result<bool, OpenReadError> {
        self.mmap.exists(path)
    }

    fn open_write(&self, path: &Path) -> Result<WritePtr, OpenWriteError> {
        self.mmap.open_write(path)
    }

    fn atomic_read(&self, path: &Path) -> Result<Vec<u8>, OpenReadError> {
        self.mmap.atomic_read(path)
    }

    fn atomic_write(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        self.mmap.atomic_write(path, data)
    }

    fn sync_directory(&self) -> io::Result<()> {
        self.mmap.sync_directory()
    }

    fn acquire_lock(&self, lock: &Lock) -> Result<DirectoryLock, LockError> {
        self.mmap.acquire_lock(lock)
    }

    fn watch(&self, watch_callback: WatchCallback) -> tantivy::Result<WatchHandle> {
        self.mmap.watch(watch_callback)
    }
}

/// An open file read by position. The file stays readable after a merge deletes it, as long
/// as a reader holds it (a searcher of an earlier commit).
#[derive(Debug)]
struct ReadFile {
    file: File,
    len: usize,
}

impl HasLen for ReadFile {
    fn len(&self) -> usize {
        self.len
    }
}

impl FileHandle for ReadFile {
    fn read_bytes(&self, range: Range<usize>) -> io::Result<OwnedBytes> {
        if range.start > range.end || range.end > self.len {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("bytes {range:?} of a {}-byte file", self.len),
            ));
        }
        if range.is_empty() {
            return Ok(OwnedBytes::empty());
        }
        let mut bytes = vec![0; range.len()];
        self.file.read_exact_at(&mut bytes, range.start as u64)?;
        Ok(OwnedBytes::new(bytes))
    }
}
