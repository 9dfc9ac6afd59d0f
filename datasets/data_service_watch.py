"""The tf.data service's watchdog: TensorFlow's client waits an hour for a dispatcher
that does not answer, and for ever for a data worker that never joins or has died (a
job's epoch ends only when every task has, measured), so a thread of ours asks the
dispatcher for its data workers every second, checks that each one accepts
connections, and ends the process in one line once one of them has been away for
wait_secs.
"""
import os
import socket
import sys
import threading
import time
from typing import Callable, List, Optional

import grpc  # TensorFlow's own dependency

# The dispatcher's RPC listing its data workers (tensorflow/core/data/service/
# dispatcher.proto): an empty request; the reply repeats field 1 (WorkerInfo), whose
# field 1 is the worker's address.
_GET_WORKERS = '/tensorflow.data.DispatcherService/GetWorkers'
_WATCH_SECS = 1.0


def _field_one(message: bytes) -> List[bytes]:
    """The length-delimited values of field 1 at a protobuf message's top level."""
    values, position = [], 0

    def varint():
        nonlocal position
        value, shift = 0, 0
        while True:
            byte = message[position]
            position += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                return value

    while position < len(message):
        key = varint()
        field, wire_type = key >> 3, key & 7
        if wire_type == 0:
            varint()
        elif wire_type == 2:
            length = varint()
            if field == 1:
                values.append(message[position:position + length])
            position += length
        else:  # fixed 64 or 32 bits
            position += 8 if wire_type == 1 else 4
    return values


def is_reachable(host_port: str, timeout: float = 1.0) -> bool:
    """Whether something accepts TCP connections at host:port."""
    host, _, port = host_port.rpartition(':')
    try:
        with socket.create_connection((host.strip('[]'), int(port)), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


class DispatcherProbe:
    """Asks a dispatcher for its data workers, over a gRPC channel kept open."""

    def __init__(self, address: str):
        self._channel = grpc.insecure_channel(address.split('://', 1)[-1])
        self._get_workers = self._channel.unary_unary(
            _GET_WORKERS, request_serializer=bytes, response_deserializer=bytes)

    def data_workers(self, timeout: float) -> Optional[List[str]]:
        """The addresses of the dispatcher's data workers; None if it did not answer."""
        try:
            reply = self._get_workers(b'', timeout=timeout)
            return [b''.join(_field_one(info)).decode() for info in _field_one(reply)]
        except (grpc.RpcError, IndexError, UnicodeDecodeError):
            return None

    def close(self):
        self._channel.close()


def report_fault_and_exit(line: str):
    """A training worker's end, its main thread maybe blocked inside TensorFlow waiting
    for input: the line, then exit status 1. Scripts set their guard's instead (see
    cli.data_service_job), which also releases the train_dir lock."""
    sys.stderr.write(f'ERROR: {line}\n')
    sys.stderr.flush()
    os._exit(1)  # pylint: disable=protected-access


class _Watch:
    """The watchdog's clocks: when the dispatcher last answered, when it last had a data
    worker, when each data worker last accepted a connection."""

    def __init__(self, address: str, wait_secs: float, need_data_workers: bool):
        self.address, self.wait_secs, self.need_data_workers = (
            address, wait_secs, need_data_workers)
        self.last_answer = self.last_with_workers = time.monotonic()
        self.ever_had_workers = False
        self.last_reached = {}

    def fault(self, workers: Optional[List[str]]) -> Optional[str]:
        """After one look at the dispatcher (its workers, or None): the line if something
        has been away for longer than the wait."""
        now, wait, address = time.monotonic(), self.wait_secs, self.address
        if workers is not None:
            self.last_answer = now
            if workers or not self.need_data_workers:
                self.last_with_workers, self.ever_had_workers = now, True
        if now - self.last_answer > wait:
            return (f'The tf.data dispatcher at {address} has not answered for {wait:g} s '
                    '(--wait_for_data_service_secs); restart it on the same port with the '
                    'same --data_service_work_dir (its jobs resume), then this task.')
        if now - self.last_with_workers > wait:
            return (f'No data worker {"has served" if self.ever_had_workers else "joined"} '
                    f'the tf.data service at {address} for {wait:g} s '
                    '(--wait_for_data_service_secs); start one: train_image_classifier.py '
                    f'--job_name=data_worker --data_service_address={address} '
                    '--data_worker_address=HOST:PORT.')
        for worker in (workers or []) if self.need_data_workers else []:
            if is_reachable(worker, timeout=0.5):
                self.last_reached[worker] = now
            elif now - self.last_reached.setdefault(worker, now) > wait:
                return (f'The data worker at {worker} of the tf.data service at {address} '
                        f'has not answered for {wait:g} s (--wait_for_data_service_secs), '
                        'and its files hold up the epoch; restart it with its command '
                        '(the same --data_worker_address: it rejoins), then this task.')
        return None


def watch(address: str, wait_secs: float, on_fault: Callable[[str], None],
          need_data_workers: bool = True) -> threading.Event:
    """Starts a daemon thread calling on_fault(one line) once the dispatcher has not
    answered for wait_secs, or (need_data_workers) it has had no data worker, or one of
    its data workers has not accepted a connection, for wait_secs. Returns an event that
    stops it."""
    stop = threading.Event()

    def run():
        probe, clocks = DispatcherProbe(address), _Watch(address, wait_secs,
                                                         need_data_workers)
        while not stop.wait(_WATCH_SECS):
            line = clocks.fault(probe.data_workers(timeout=min(5.0, wait_secs)))
            if line:
                probe.close()
                on_fault(line)
                return

    threading.Thread(target=run, daemon=True, name='data-service-watchdog').start()
    return stop
