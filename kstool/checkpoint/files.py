"""Opens an app's checkpoint wherever it is (kstool.checkpoint.location): a local folder
with plain file calls, any other Hadoop file system (hdfs://, s3a://, ...) through Hadoop's
FileSystem in Spark's JVM, the same code and settings (`--conf spark.hadoop.*`) Spark uses to
write it: the session already running in this process, or a small local one."""

from __future__ import annotations

from typing import Callable, cast

from kstool.application.model import AppPaths, Manifest, checkpoint_uri
from kstool.checkpoint.exceptions import CheckpointLocationError
from kstool.checkpoint.location import CheckpointFiles, LocalCheckpoint, local_path

# starts a small local Spark when this process runs none (kstool.engine.spark.session: the one
# part of kstool that starts Spark), passed by whoever opens a checkpoint
StartSpark = Callable[[], object]


def open_checkpoint(uri: str, *, start_spark: StartSpark) -> CheckpointFiles:
    path = local_path(uri)
    return LocalCheckpoint(uri, path) if path is not None else HadoopCheckpoint(uri, start_spark)


def app_checkpoint(paths: AppPaths, manifest: Manifest | None, *, start_spark: StartSpark) -> CheckpointFiles:
    location = manifest.checkpoint_location if manifest else None
    return open_checkpoint(checkpoint_uri(paths, location), start_spark=start_spark)


def _jvm_and_conf(start_spark: StartSpark):
    from pyspark import SparkContext

    if SparkContext._active_spark_context is None:
        start_spark()
    context = cast(SparkContext, SparkContext._active_spark_context)
    return context._jvm, context._jsc.hadoopConfiguration()


class HadoopCheckpoint:
    def __init__(self, uri: str, start_spark: StartSpark):
        self.uri = uri
        self._start_spark = start_spark
        self._fs = None

    def _path(self, name: str = ""):
        jvm, conf = _jvm_and_conf(self._start_spark)
        path = jvm.org.apache.hadoop.fs.Path(f"{self.uri}/{name}" if name else self.uri)
        if self._fs is None:
            try:
                self._fs = path.getFileSystem(conf)
            except Exception as e:  # no FileSystem for the scheme, bad host, ...
                raise CheckpointLocationError(f"checkpoint location {self.uri}: {_reason(e)}") from None
        return path

    def _call(self, what, name: str = ""):
        path = self._path(name)
        try:
            return what(self._fs, path)
        except Exception as e:
            raise CheckpointLocationError(f"checkpoint location {self.uri}: {_reason(e)}") from None

    def names(self, folder: str) -> list[str]:
        def listing(fs, path):
            if not fs.exists(path):
                return []
            return sorted(status.getPath().getName() for status in fs.listStatus(path))
        return self._call(listing, folder)

    def read_text(self, name: str) -> str:
        def read(fs, path):
            stream = fs.open(path)
            try:
                jvm, _ = _jvm_and_conf(self._start_spark)
                return bytes(jvm.org.apache.commons.io.IOUtils.toByteArray(stream)).decode("utf-8")
            finally:
                stream.close()
        return self._call(read, name)

    def exists(self, name: str = "") -> bool:
        return self._call(lambda fs, path: bool(fs.exists(path)), name)

    def delete(self) -> None:
        self._call(lambda fs, path: fs.delete(path, True))

    def remove(self, name: str) -> None:
        self._call(lambda fs, path: fs.delete(path, False), name)

    def check_usable(self) -> None:
        self.exists()


def _reason(error: Exception) -> str:
    """The Java exception's own message, without py4j's frame."""
    java = getattr(error, "java_exception", None)
    text = str(java.getMessage() or java.toString()) if java is not None else str(error)
    return text.splitlines()[0].strip()
